"""The cluster test's reference: the demo built by the embedded engine, in a process and a
lakehouse of its own, so that it runs while the cluster starts and builds the same landing.

    python embedded_reference.py PROJECT PROFILES SCALE SYNCS SEED EXTRACTS OUT

Builds the landing one day at a time as `make demo` does, but for the data tests (the `demo`
fixture's build tests them), then writes to OUT (a pickle) every table and view of the build as
`comparable` reads it. The cluster test compares its own build with that file, so it needs
neither this process's Derby metastore (which serves one process) nor its session.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections import Counter
from pathlib import Path

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


def main(project: str, profiles: str, scale: str, syncs: str, seed: str, extracts: str, out: str) -> None:
    from dbt.cli.main import dbtRunner
    from pyspark.sql import SparkSession

    from lakehistory.history import lock
    from lakehistory_tools.generator import GeneratorConfig, generate

    config = GeneratorConfig(scale=int(scale), syncs=int(syncs), seed=int(seed))
    for sync in range(1, config.syncs + 1):
        generate(Path(project) / "landing", config, extract_tables=extracts.split(","), only_sync=sync)
        # One thread: the nodes one after another, which the cluster's four threads must not change.
        args = ["build", "--exclude-resource-type", "test", "--threads", "1", "--target", "local"]
        if not dbtRunner().invoke([*args, "--project-dir", project, "--profiles-dir", profiles]).success:
            sys.exit(f"embedded dbt build of day {sync} failed")
    lock.let_go_all()  # the writer lock as the build leaves it at exit, before it is read
    spark = SparkSession.builder.getOrCreate()  # dbt's session
    schema = os.environ["LAKEHISTORY_SCHEMA"]
    tables = {table: comparable(spark, schema, table) for table in stored_relations(spark, schema)}
    Path(out).write_bytes(pickle.dumps(tables))


if __name__ == "__main__":
    main(*sys.argv[1:])
