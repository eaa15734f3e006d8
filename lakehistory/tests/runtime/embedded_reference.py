"""The cluster test's reference when no saved `demo` fixture build of the same sources is there
(`make test-cluster` on its own, after a change): the demo built by the embedded engine, in a
process and a lakehouse of its own, so that it runs while the cluster starts and builds the same
landing.

    python embedded_reference.py PROJECT PROFILES SCALE SYNCS SEED EXTRACTS OUT

Builds the landing one day at a time as `make demo` does, but for the data tests (the `demo`
fixture's build tests them), then writes to OUT (a pickle) every table and view of the build as
`build_tables.comparable` reads it. The cluster test compares its own build with that file, so
it needs neither this process's Derby metastore (which serves one process) nor its session.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' own modules, as pytest has them
from build_tables import tables_of  # noqa: E402


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
    Path(out).write_bytes(pickle.dumps(tables_of(spark, schema)))


if __name__ == "__main__":
    main(*sys.argv[1:])
