"""A Spark Connect server on this machine, with Delta Lake, for trying the `connect` target.

    python -m lakehistory.platform.connect_server --port 15002 --lakehouse .local/connect-lakehouse
    SPARK_REMOTE=sc://127.0.0.1:15002 dbt build --profiles-dir . --target connect

In production the server is a Spark cluster's; it owns the catalog, the metastore and the
Delta configuration, which is why they are set here and not in the profile's `connect` target.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from lakehistory.platform import jars
from lakehistory.platform.paths import jar_dir, local_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def server_command(port: int, lakehouse: Path) -> list[str]:
    spark_home = Path(pyspark.__file__).parent
    delta_jars = ",".join(str(jar_dir() / name) for name in jars.REQUIRED)
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.sources.default": "delta",
        "spark.sql.warehouse.dir": str(lakehouse / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={lakehouse}/metastore_db;create=true",
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={lakehouse} -Dlog4j2.configurationFile={local_home() / 'log4j2.properties'}"
        ),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.ui.enabled": "false",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
    }
    command = [str(spark_home / "bin" / "spark-submit"), "--master", "local[2]", "--class", SERVER_CLASS]
    command += ["--jars", delta_jars, "--driver-memory", "4g"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def start(port: int, lakehouse: Path, log: Path) -> subprocess.Popen:
    """Start the server in the background and return once it accepts connections."""
    lakehouse.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent)}
    env.pop("SPARK_REMOTE", None)
    with open(log, "ab") as out:
        command = server_command(port, lakehouse)  # our own spark-submit and settings
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)  # noqa: S603
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Spark Connect server exited with {process.returncode}; see {log}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(1)
    process.kill()
    raise RuntimeError(f"Spark Connect server did not listen on 127.0.0.1:{port} within 180 s; see {log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument("--lakehouse", type=Path, default=local_home() / "connect-lakehouse")
    args = parser.parse_args()
    log = args.lakehouse / "server.log"
    args.lakehouse.mkdir(parents=True, exist_ok=True)
    process = start(args.port, args.lakehouse.resolve(), log)
    print(f"Spark Connect listening on sc://127.0.0.1:{args.port} (log: {log}); Ctrl-C stops it")
    try:
        sys.exit(process.wait())
    except KeyboardInterrupt:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
