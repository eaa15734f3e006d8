"""dbt's adapter test framework (`dbt.tests.fixtures.project`) on the `sparksession` adapter: one
embedded Spark session with Delta Lake for the whole run, its warehouse and Derby metastore in a
temporary folder. Each test class gets its own project and schema from the framework."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest_plugins = ["dbt.tests.fixtures.project"]

# The Delta Lake jars that the repository's setup caches for the installed delta-spark and pyspark
# (setup/bootstrap.sh: lakehistory.runtime.jars keeps them alone in jars/delta).
DELTA_JARS = "jars/delta"

# The engine sized for the suite's few rows per query, as the repository's own tests size theirs
# (LAKEHISTORY_TINY_DATA in its profiles.yml, the JVM flags in lakehistory/tests/harness.py): one
# task per stage, expressions interpreted, no re-planning after each stage, and a JIT and garbage
# collector for thousands of short queries. Run so and as before (two partitions, code generation
# and adaptive execution on, Java's own JIT and collector) in turn, the suite took 151 s against
# 194 s, then 149 s against 169 s.
SHORT_QUERIES = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
SHORT_QUERY_JVM = (
    "-XX:Tier4InvocationThreshold=15000 -XX:Tier4MinInvocationThreshold=6000"
    " -XX:Tier4CompileThreshold=30000 -XX:Tier4BackEdgeThreshold=120000 -XX:+UseParallelGC"
)


def pytest_configure(config: pytest.Config) -> None:
    os.environ["TZ"] = "UTC"  # PySpark hands timestamps to Python in the process's time zone
    time.tzset()


@pytest.fixture(scope="session")
def dbt_profile_target(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = Path(os.environ.get("LAKEHISTORY_HOME") or Path(__file__).resolve().parents[2] / ".local")
    jars = sorted((home / DELTA_JARS).glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"Delta Lake jars not found in {home / DELTA_JARS} (run `make setup` first)")
    lakehouse = tmp_path_factory.mktemp("lakehouse")
    return {
        "type": "sparksession",
        "method": "session",
        "host": "embedded",
        "threads": 1,
        "server_side_parameters": {
            "spark.master": "local[2]",
            "spark.driver.memory": "4g",
            "spark.jars": ",".join(str(jar) for jar in jars),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.sql.sources.default": "delta",
            "spark.sql.warehouse.dir": str(lakehouse / "warehouse"),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={lakehouse}/metastore_db;create=true"
            ),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={lakehouse} {SHORT_QUERY_JVM}",
            "spark.sql.session.timeZone": "UTC",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **SHORT_QUERIES,
        },
    }
