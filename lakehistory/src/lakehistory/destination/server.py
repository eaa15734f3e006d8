"""`lakehistory destination`: the gRPC server Fivetran's Partner SDK talks to.

    lakehistory destination [--port 50052] [--host ::] [--workers 8]
                            [--tls-cert CERT --tls-key KEY] [--grace 60]

It listens on every address (IPv6 and IPv4) unless --host names one, serves requests on a pool of
threads (one request per table at a time), answers gRPC's standard health check
(`grpc.health.v1.Health`, service "" and `fivetran_sdk.v2.DestinationConnector`), and on SIGTERM
or SIGINT stops taking requests and finishes the ones in flight (up to --grace seconds)."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from types import FrameType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .sdk import destination_sdk_pb2_grpc as sdk_grpc
from .service import Destination, log

SERVICE = "fivetran_sdk.v2.DestinationConnector"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lakehistory destination", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--port", type=int, default=50052, help="the port to listen on (default 50052)")
    p.add_argument("--host", default="[::]", help="the address to listen on (default: every address)")
    p.add_argument("--workers", type=int, default=8, help="requests served at once (default 8)")
    p.add_argument("--tls-cert", type=Path, help="the server's certificate chain (PEM), with --tls-key")
    p.add_argument("--tls-key", type=Path, help="the server's private key (PEM), with --tls-cert")
    p.add_argument("--grace", type=float, default=60.0, help="seconds a stop waits for requests in flight")
    return p


class Server:
    """The destination's gRPC server, started; `stop()` finishes the requests in flight."""

    def __init__(
        self,
        port: int,
        host: str = "[::]",
        workers: int = 8,
        tls: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
        sdk_grpc.add_DestinationConnectorServicer_to_server(Destination(), self.grpc)  # type: ignore[no-untyped-call]
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        address = f"{host}:{port}"
        if tls is None:
            self.port = self.grpc.add_insecure_port(address)
        else:
            credentials = grpc.ssl_server_credentials([(tls[1], tls[0])])
            self.port = self.grpc.add_secure_port(address, credentials)
        if self.port == 0:
            raise OSError(f"cannot listen on {address}")
        self.grpc.start()
        for service in ("", SERVICE):
            self.health.set(service, health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float) -> None:
        """Answer NOT_SERVING, refuse new requests, and wait for those in flight."""
        self.health.enter_graceful_shutdown()
        self.grpc.stop(grace).wait()

    def wait(self) -> None:
        self.grpc.wait_for_termination()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser().error("--tls-cert and --tls-key go together")
    tls = (args.tls_cert.read_bytes(), args.tls_key.read_bytes()) if args.tls_cert else None
    server = Server(args.port, args.host, args.workers, tls)
    log("INFO", f"lakehistory destination listening on {args.host}:{server.port}{' with TLS' if tls else ''}")
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        if not stopping.is_set():
            stopping.set()
            log("INFO", f"lakehistory destination stopping ({signal.Signals(signum).name}): finishing requests")
            threading.Thread(target=server.stop, args=(args.grace,), daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.wait()
    log("INFO", "lakehistory destination stopped")
    return 0
