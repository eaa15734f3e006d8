"""The Connect server's command line, as an operator sets it (no server started: the `connect`
tests run one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehistory.runtime import jars
from lakehistory.runtime.connect_server import parse_settings, server_command


def flags(command: list[str]) -> dict[str, str]:
    """spark-submit's `--flag value` pairs, but the repeated `--conf`."""
    pairs = zip(command[1:-1:2], command[2:-1:2], strict=True)
    return {flag: value for flag, value in pairs if flag != "--conf"}


def confs(command: list[str]) -> dict[str, str]:
    pairs = zip(command[1:-1:2], command[2:-1:2], strict=True)
    return dict(value.split("=", 1) for flag, value in pairs if flag == "--conf")


def test_the_defaults_are_the_embedded_single_machine(tmp_path: Path) -> None:
    command = server_command(parse_settings(["--lakehouse", str(tmp_path)]))
    assert command[-1] == "spark-internal"
    given = flags(command)
    assert given["--master"] == "local[2]"
    assert given["--driver-memory"] == "4g"
    assert not {"--executor-memory", "--executor-cores", "--total-executor-cores"} & given.keys()
    assert [Path(j).name for j in given["--jars"].split(",")] == list(jars.required())
    conf = confs(command)
    assert conf["spark.connect.grpc.binding.address"] == conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "warehouse")
    assert conf["spark.sql.shuffle.partitions"] == "4"


def test_a_cluster_master_with_executor_settings_shared_warehouse_and_metastore(tmp_path: Path) -> None:
    command = server_command(
        parse_settings(
            [
                *("--lakehouse", str(tmp_path), "--port", "16002", "--host", "10.0.0.5"),
                *("--master", "spark://spark-master:7077", "--executor-memory", "2g", "--executor-cores", "1"),
                *("--total-executor-cores", "4", "--warehouse", "s3a://lake/warehouse"),
                *("--conf", "spark.hadoop.hive.metastore.uris=thrift://metastore:9083"),
                *("--conf", "spark.sql.session.timeZone=UTC"),
                *("--conf", "spark.driver.host=driver.internal"),
                *("--conf", "spark.driver.extraJavaOptions=-XX:+UseParallelGC"),
            ]
        )
    )
    given = flags(command)
    assert given["--master"] == "spark://spark-master:7077"
    assert (given["--executor-memory"], given["--executor-cores"], given["--total-executor-cores"]) == ("2g", "1", "4")
    # shipped to every executor, S3A's with Delta's for the s3a:// warehouse
    assert [Path(j).name for j in given["--jars"].split(",")] == list(jars.for_object_store())
    conf = confs(command)
    assert conf["spark.connect.grpc.binding.port"] == "16002"
    assert conf["spark.connect.grpc.binding.address"] == "10.0.0.5"
    assert conf["spark.driver.host"] == "driver.internal"  # an operator's --conf wins over ours
    assert conf["spark.sql.warehouse.dir"] == "s3a://lake/warehouse"
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://metastore:9083"
    assert "spark.sql.shuffle.partitions" not in conf  # the two-core sizing is for local masters only
    assert sum(part.startswith("spark.driver.host=") for part in command) == 1
    # An operator's JVM flags join the server's own: the JVM still runs in UTC.
    java = conf["spark.driver.extraJavaOptions"].split()
    assert java[0] == "-Duser.timezone=UTC" and java[-1] == "-XX:+UseParallelGC", java


@pytest.mark.parametrize("bad", ["spark.ui.enabled", "=true"])
def test_a_setting_without_a_key_and_value_is_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_settings(["--conf", bad])
    assert f"expected KEY=VALUE, got {bad!r}" in capsys.readouterr().err
