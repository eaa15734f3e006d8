"""An embedded build of the sync benchmark's two history models, for test_embedded_store.py,
on a local disk or with its warehouse and landing on the object store (the environment says
which: LAKEHISTORY_WAREHOUSE, LAKEHISTORY_LANDING).

    python store_build.py PROJECT PROFILES LOCAL_LANDING OUT

Lands the batches of three days into LOCAL_LANDING (and copies them to the landing on the store,
as a connector lands them there), runs `dbt run` after each, the third day a backlog of two
batches, then writes every table as `comparable` reads it, and each table's location, to OUT.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' own modules, as pytest has them

DAYS = ([range(1, 21)], [range(1, 21, 2)], [range(3, 8), range(15, 25)])
MODELS = ("sync_s001", "sync_s002")


def main(project: str, profiles: str, local_landing: str, out: str) -> None:
    from build_tables import comparable, stored_relations
    from dbt.cli.main import dbtRunner
    from pyspark.sql import SparkSession

    from lakehistory_tools.bench import sync_tables
    from lakehistory_tools.object_store import Store

    landing, local = os.environ["LAKEHISTORY_LANDING"], Path(local_landing)
    store = None
    if landing.startswith("s3a://"):
        keys = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        store = Store(os.environ["LAKEHISTORY_S3_ENDPOINT"], *keys, metrics="")
    n = 0
    for day in DAYS:
        for keys in day:
            n += 1
            for i in (1, 2):
                sync_tables.land(local, i, n, keys)
        if store is not None:
            store.upload(local, landing)
        args = ["run", "--select", *MODELS, "--threads", "1", "--target", "local"]
        if not dbtRunner().invoke([*args, "--project-dir", project, "--profiles-dir", profiles]).success:
            sys.exit(f"embedded dbt run of day {n} failed")
    spark = SparkSession.builder.getOrCreate()  # dbt's session
    schema = os.environ["LAKEHISTORY_SCHEMA"]
    tables = {table: comparable(spark, schema, table) for table in stored_relations(spark, schema)}
    locations = {t: spark.sql(f"describe detail `{schema}`.`{t}`").collect()[0].location for t in tables}
    Path(out).write_bytes(pickle.dumps((tables, locations)))


if __name__ == "__main__":
    main(*sys.argv[1:])
