"""A Spark Connect server with Delta Lake: the engine of the profile's `connect` target.

    # on this machine (embedded defaults: local[2], lakehouse in .local/connect-lakehouse)
    python -m lakehistory.runtime.connect_server --port 15002
    # on a standalone cluster: executors get the Delta jars from the server (spark-submit --jars)
    python -m lakehistory.runtime.connect_server --master spark://spark-master:7077 \\
        --host 10.0.0.5 --executor-memory 4g --executor-cores 2 --total-executor-cores 8 \\
        --warehouse s3a://lake/warehouse --conf spark.hadoop.hive.metastore.uris=thrift://metastore:9083
    SPARK_REMOTE=sc://10.0.0.5:15002 dbt build --target connect

(docs/deployment.md: the same on object storage, with the commands the cluster test runs.)

The server owns the catalog, the metastore and the Delta configuration, which is why they are set
here and not in the profile's `connect` target. On a cluster the warehouse must be storage every
executor reads (HDFS, S3, ...), and the metastore one that several clients can use (a Hive
metastore service): the default Derby metastore in the lakehouse folder serves this process only.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from lakehistory.runtime import jars
from lakehistory.runtime.paths import jar_dir, local_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


@dataclass(frozen=True)
class ServerSettings:
    """Where the server runs and what it may use; the defaults are the embedded single machine."""

    lakehouse: Path  # the Derby metastore, the server's log and (unless `warehouse`) the tables
    port: int = 15002
    host: str = "127.0.0.1"  # where clients reach the server, and executors its driver
    master: str = "local[2]"
    driver_memory: str = "4g"
    executor_memory: str | None = None
    executor_cores: int | None = None
    total_executor_cores: int | None = None  # a standalone or Mesos cluster's cap for this server
    warehouse: str | None = None  # a path or URI (hdfs://, s3a://); on a cluster, shared storage
    # Hadoop's S3A connector for s3a:// URIs (a landing on object storage); implied by an s3a://
    # warehouse. Store and credentials: Spark settings and the environment (docs/deployment.md).
    s3a: bool = False
    # More Spark settings; they win over ours, but driver JVM flags are added to ours (see server_conf).
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.master.startswith("local")

    @property
    def on_object_store(self) -> bool:
        return self.s3a or (self.warehouse or "").startswith("s3a://")

    @property
    def jars(self) -> tuple[str, ...]:
        return jars.for_object_store() if self.on_object_store else jars.required()


def server_conf(settings: ServerSettings) -> dict[str, str]:
    lakehouse = settings.lakehouse
    conf = {
        "spark.connect.grpc.binding.address": settings.host,
        "spark.connect.grpc.binding.port": str(settings.port),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.sources.default": "delta",
        "spark.sql.warehouse.dir": settings.warehouse or str(lakehouse / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={lakehouse}/metastore_db;create=true",
        DRIVER_JAVA_OPTIONS: (
            # UTC, or Delta rebuilds a small table's state after every commit to check it
            f"-Duser.timezone=UTC -Dderby.system.home={lakehouse}"
            f" -Dlog4j2.configurationFile={local_home() / 'log4j2.properties'}"
        ),
        "spark.driver.bindAddress": settings.host,
        "spark.driver.host": settings.host,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        # a history run needs about 350 compiled query classes, the same each run; Spark keeps 100
        "spark.sql.codegen.cache.maxEntries": "1000",
    }
    if settings.local:
        # Sized for two cores in one JVM; on a cluster Spark's defaults (adaptive execution
        # coalesces the shuffle partitions) fit the executors better.
        conf |= {"spark.sql.shuffle.partitions": "4", "spark.databricks.delta.snapshotPartitions": "2"}
    # An operator's JVM flags (a JIT or GC setting) join ours: without the time zone and the
    # metastore's home the server would run, but slower and with its Derby files elsewhere.
    merged = conf | settings.conf
    if own := settings.conf.get(DRIVER_JAVA_OPTIONS):
        merged[DRIVER_JAVA_OPTIONS] = f"{conf[DRIVER_JAVA_OPTIONS]} {own}"
    return merged


def server_command(settings: ServerSettings) -> list[str]:
    spark_home = Path(pyspark.__file__).parent
    # --jars puts Delta (and S3A) on the driver's classpath and ships them to every executor.
    shipped = ",".join(str(jar_dir() / name) for name in settings.jars)
    command = [str(spark_home / "bin" / "spark-submit"), "--master", settings.master, "--class", SERVER_CLASS]
    command += ["--jars", shipped, "--driver-memory", settings.driver_memory]
    for flag, value in (
        ("--executor-memory", settings.executor_memory),
        ("--executor-cores", settings.executor_cores),
        ("--total-executor-cores", settings.total_executor_cores),
    ):
        if value is not None:
            command += [flag, str(value)]
    for key, value in server_conf(settings).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def start(settings: ServerSettings, log: Path) -> subprocess.Popen[bytes]:
    """Start the server in the background and return once it accepts connections."""
    settings.lakehouse.mkdir(parents=True, exist_ok=True)
    jars.ensure(object_store=settings.on_object_store)  # S3A's, fetched once, when first needed
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent)}
    env.pop("SPARK_REMOTE", None)
    with open(log, "ab") as out:
        command = server_command(settings)  # our own spark-submit and settings
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)  # noqa: S603
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Spark Connect server exited with {process.returncode}; see {log}")
        with socket.socket() as probe:
            if probe.connect_ex((settings.host, settings.port)) == 0:
                return process
        time.sleep(1)
    process.kill()
    raise RuntimeError(
        f"Spark Connect server did not listen on {settings.host}:{settings.port} within 180 s; see {log}"
    )


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def parse_settings(argv: Sequence[str] | None = None) -> ServerSettings:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument(
        "--lakehouse",
        type=Path,
        default=local_home() / "connect-lakehouse",
        help="folder of the Derby metastore, the server's log and (without --warehouse) the tables",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address clients and executors reach the server at")
    parser.add_argument("--master", default="local[2]", help="local[N], spark://host:7077, yarn, k8s://...")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--executor-memory")
    parser.add_argument("--executor-cores", type=int)
    parser.add_argument("--total-executor-cores", type=int)
    parser.add_argument("--warehouse", help="where the tables are: a path, or a URI of shared storage on a cluster")
    parser.add_argument(
        "--s3a", action="store_true", help="ship Hadoop's S3A connector (implied by an s3a:// --warehouse)"
    )
    parser.add_argument(
        "--conf", type=_setting, action="append", default=[], metavar="KEY=VALUE", help="any other Spark setting"
    )
    args = parser.parse_args(argv)  # its names are ServerSettings' fields
    return ServerSettings(**vars(args) | {"lakehouse": args.lakehouse.resolve(), "conf": dict(args.conf)})


def main() -> None:
    settings = parse_settings()
    log = settings.lakehouse / "server.log"
    process = start(settings, log)
    url = f"sc://{settings.host}:{settings.port}"
    print(f"Spark Connect listening on {url} ({settings.master}; log: {log}); Ctrl-C stops it")
    try:
        sys.exit(process.wait())
    except KeyboardInterrupt:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
