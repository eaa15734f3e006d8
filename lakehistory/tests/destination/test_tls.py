"""`lakehistory destination --tls-cert --tls-key`: Fivetran reaches it over TLS, and a client
without TLS gets nothing."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from lakehistory.destination.sdk import common_pb2 as common
from lakehistory.destination.sdk import destination_sdk_pb2_grpc as sdk_grpc
from lakehistory.destination.server import Server


def self_signed() -> tuple[bytes, bytes]:
    """A certificate for 127.0.0.1 and localhost, and its key, as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.PEM), pem_key


def test_the_destination_speaks_tls_when_given_a_certificate(tmp_path: Path) -> None:
    certificate, key = self_signed()
    server = Server(port=0, host="127.0.0.1", tls=(certificate, key))
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=certificate)
        with grpc.secure_channel(f"127.0.0.1:{server.port}", credentials) as channel:
            form = sdk_grpc.DestinationConnectorStub(channel).ConfigurationForm(common.ConfigurationFormRequest())
            assert [f.name for f in form.fields] == ["landing_root", "spark_remote"]
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as plain, pytest.raises(grpc.RpcError):
            sdk_grpc.DestinationConnectorStub(plain).ConfigurationForm(common.ConfigurationFormRequest(), timeout=5)
    finally:
        server.stop(grace=5)
