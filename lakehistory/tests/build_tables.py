"""A build's tables as two builds of the same landing are compared: every table and view as a
multiset of rows, without the columns that hold a run's wall-clock time. The `demo` fixture
(conftest.py) saves its build's so, and the cluster test (runtime/test_spark_connect.py) compares
its build over Spark Connect with that, instead of building the demo embedded a second time.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import Counter
from pathlib import Path

from harness import REPO_ROOT
from lakehistory.runtime.paths import local_home

# Columns that hold the wall-clock time of a run (or are made from it), so differ between builds:
# a transaction's times and uuid (and a sync's reservation), the order and time its tables were
# recorded in (threads differ), the events' and states' transaction times (the states' `xyz`
# too), and the dbt columns of the one snapshot without an updated_at column (dbt stamps its
# versions with the run's time).
WALL_CLOCK = {
    "txn_uuid",
    "started_at",
    "committed_at",
    "reserved_at",
    "row_index",
    "visible_at",
    "xyz",
    "_hist_time",
    "at",
    "created_at",
    "updated_at",
    "rtcts",
    "rtuts",
    "uuid",
}
SNAPSHOT_CLOCK = {"dbt_scd_id", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to"}
WALL_CLOCK_OF = {"platform_variables_snapshot": WALL_CLOCK | SNAPSHOT_CLOCK}


def stored_relations(spark, schema: str) -> list[str]:
    """The tables and views of a schema, without the session's temporary views."""
    return sorted(r["tableName"] for r in spark.sql(f"show tables in `{schema}`").collect() if not r["isTemporary"])


def comparable(spark, schema: str, table: str) -> Counter:
    """A table's rows as a multiset, without the wall-clock columns, and with the schema name
    left out of the table names the transactions record."""
    from pyspark.sql import functions as F

    frame = spark.table(f"`{schema}`.`{table}`")
    frame = frame.select(*sorted(c for c in frame.columns if c not in WALL_CLOCK_OF.get(table, WALL_CLOCK)))
    if "history_table" in frame.columns:
        frame = frame.withColumn("history_table", F.replace("history_table", F.lit(f"{schema}."), F.lit("")))
    return Counter(tuple(_hashable(value) for value in row) for row in frame.collect())


def _hashable(value):
    """An array column's value (a list, e.g. the tables a sync holds) as a tuple, to count rows by."""
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def tables_of(spark, schema: str) -> dict[str, Counter]:
    return {table: comparable(spark, schema, table) for table in stored_relations(spark, schema)}


# What a build's tables are made of: the engine, the adapter, the package's macros, the demo
# project and its generator. A saved build made from other sources is not a reference.
SOURCES = (
    "lakehistory/src",
    "dbt-sparksession/src",
    "macros",
    "integration_tests",
    "tools/src/lakehistory_tools/generator",
)
SOURCE_SUFFIXES = {".py", ".sql", ".yml", ".yaml", ".csv", ".md"}
UNTRACKED = {"__pycache__", "target", "dbt_packages", "logs"}  # what a run of dbt leaves (.gitignore)


def fingerprint(*inputs: object) -> str:
    """A digest of the build's sources and of `inputs` (the generator's configuration)."""
    digest = hashlib.sha256(repr(inputs).encode())
    for folder in SOURCES:
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and path.is_file() and not UNTRACKED & set(path.parts):
                digest.update(str(path.relative_to(REPO_ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def saved_demo() -> Path:
    return local_home() / "test-artifacts" / "demo_tables.pickle"


def save(path: Path, made_of: str, tables: dict[str, Counter]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(pickle.dumps((made_of, tables)))
    partial.replace(path)


def load(path: Path, made_of: str) -> dict[str, Counter] | None:
    """The tables saved at `path`, if they were made of the sources and inputs `made_of` names."""
    if not path.is_file():
        return None
    saved_of, tables = pickle.loads(path.read_bytes())  # noqa: S301 - the test suite's own file
    return tables if saved_of == made_of else None
