"""`python -m lakehistory_tools.bench.sync`: what one sync of a connector's many tables costs.

    python -m lakehistory_tools.bench.sync                          # 50 tables, 3 rounds
    python -m lakehistory_tools.bench.sync --tables 10,50,100 --runs 3

A connector delivers a batch for each of many tables per sync, most of them small. Each table has
a history model (a few hundred rows of history, four columns); each round lands a 5-row batch for
every table (for every other one in the `idle` round) and applies them with one `dbt run` of the
history models, with the profile's threads. Side by side, in alternating order, the hand-written
floor applies the same landed files to Fivetran-shaped copies of the tables in the same Spark
session: per table, read the CSV files, one MERGE, one INSERT; one table at a time and with as
many threads as dbt, the faster of the two. It prints the medians, their ratio, the cost of one
more table (the slope over the table counts) and an idle node's share of the run's wall time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from lakehistory.landing.batch import TMAX, Batch, Column
from lakehistory.landing.writer import write_batch
from lakehistory.platform.paths import local_home

SOURCE = "sync"
COLUMNS = [Column("id", "bigint"), Column("name", "string"), Column("amount", "double"), Column("flag", "boolean")]
HISTORY_KEYS = 200  # rows of each table's first batch; the second revises half of them
BATCH_KEYS = 5
THREADS = 4  # the profile's
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def table(i: int) -> str:
    return f"s{i:03d}"


def model(i: int) -> str:
    return f"sync_{table(i)}"


def write_project(project: Path, tables: int) -> None:
    """One source entry and one history model per table, as a user's project has them."""
    folder = project / "models" / "sync"
    folder.mkdir(parents=True, exist_ok=True)
    entries = [
        {
            "name": table(i),
            "meta": {"lakehistory": {"key": ["id"]}},
            "columns": [{"name": c.name, "data_type": c.type} for c in COLUMNS],
        }
        for i in range(1, tables + 1)
    ]
    source = {
        "name": SOURCE,
        "meta": {"lakehistory": {"landing_root": "{{ env_var('LAKEHISTORY_LANDING') }}"}},
        "tables": entries,
    }
    (folder / "_sync__sources.yml").write_text(json.dumps({"version": 2, "sources": [source]}, indent=2))
    for i in range(1, tables + 1):
        (folder / f"{model(i)}.sql").write_text(
            "{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key=['id']) }}\n"
            f"select * from {{{{ lakehistory.landing_batches('{SOURCE}', '{table(i)}') }}}}\n"
        )


def _row(key: int, start: dt.datetime, n: int) -> dict:
    return {
        "id": key,
        "name": f"name {key} v{n}",
        "amount": key * 1.5 + n,
        "flag": (key + n) % 2 == 0,
        "_fivetran_start": start,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": start,
    }


def land(landing: Path, i: int, n: int, keys: Sequence[int]) -> None:
    """Batch n of table i: a new version of each of `keys`, an hour after batch n - 1."""
    start = T0 + dt.timedelta(hours=n)
    rows = [_row(k, start, n) for k in keys]
    batch = Batch(
        table=table(i),
        batch_id=f"{n:06d}",
        sequence=n,
        key=["id"],
        columns=COLUMNS,
        replace=rows,
        earliest=[{"id": k, "_fivetran_start": start} for k in keys],
    )
    write_batch(landing, batch)


def hand_apply(spark, landing: Path, schema: str, i: int, *, n: int, threads: int) -> None:
    """The floor for one table: its batch's files read and typed, one MERGE that ends the active
    rows of the batch's keys (rule 8), one INSERT of the new versions (rule 9)."""
    from pyspark.sql import functions as F

    types = {c.name: c.type for c in COLUMNS} | {
        "_fivetran_start": "timestamp",
        "_fivetran_end": "timestamp",
        "_fivetran_active": "boolean",
        "_fivetran_synced": "timestamp",
    }
    folder = landing / table(i) / f"{n:06d}"
    raw = spark.read.option("header", True).csv(str(folder / "replace_0.csv"))
    rows = raw.select(*[F.col(c).cast(types[c]) for c in types])
    target = f"`{schema}`.`{hand_table(i, threads)}`"
    spark.sql(
        f"""
        merge into {target} as t
        using (select `id`, min(`_fivetran_start`) as `earliest` from {{rows}} group by `id`) as s
        on t.`id` = s.`id` and t.`_fivetran_active`
        when matched then update set
            t.`_fivetran_end` = s.`earliest` - interval 1 millisecond, t.`_fivetran_active` = false
        """,
        rows=rows,
    )
    rows.write.format("delta").mode("append").saveAsTable(target)


def hand_table(i: int, threads: int) -> str:
    """The floor's Fivetran-shaped copy of table i, one per way it is applied."""
    return f"hand{threads}_{table(i)}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    counts = sorted(int(t) for t in args.tables.split(","))
    most = counts[-1]
    work = (args.out or local_home() / "bench-sync").resolve()
    from lakehistory_tools.bench.__main__ import fresh_project

    dbt = fresh_project(args.repository, work)
    write_project(dbt.project, most)
    schema, landing = "bench_sync", work / "landing"
    spark = _spark(dbt, schema, landing)
    for i in range(1, most + 1):
        land(landing, i, 1, range(1, HISTORY_KEYS + 1))
        land(landing, i, 2, range(1, HISTORY_KEYS + 1, 2))
    models = [model(i) for i in range(1, most + 1)]
    dbt(schema, landing, "run", "--select", *models)  # the tables' history: not timed
    for i in range(1, most + 1):
        for threads in (1, THREADS):
            spark.sql(
                f"create or replace table `{schema}`.`{hand_table(i, threads)}` using delta as"
                f" select * except (`valid_from`, `valid_to`) from `{schema}`.`{model(i)}`"
            )

    n = 2
    seconds: dict[tuple[str, int], list[float]] = {}
    idle_shares: list[float] = []
    for r in range(1, args.runs + 1):
        for tables in counts if r % 2 else counts[::-1]:
            n += 1
            for i in range(1, tables + 1):
                land(landing, i, n, range(r * 7 % 100 + 1, r * 7 % 100 + 1 + BATCH_KEYS))
            for name in ("dbt", "hand") if r % 2 else ("hand", "dbt"):
                if name == "dbt":
                    took, _ = _dbt_run(dbt, schema, landing, tables)
                else:
                    took = _floor(spark, landing, schema, tables, n)
                seconds.setdefault((name, tables), []).append(took)
                print(f"round {r}, {tables} tables, {name}: {took:.1f}s", flush=True)
        # the idle round: a batch for every other table of the most
        n += 1
        for i in range(1, most + 1, 2):
            land(landing, i, n, range(1, BATCH_KEYS + 1))
        took, nodes = _dbt_run(dbt, schema, landing, most)
        busy = {model(i) for i in range(1, most + 1, 2)}
        idle = [s for name, s in nodes.items() if name not in busy]
        share = took * sum(idle) / sum(nodes.values()) / len(idle)
        idle_shares.append(share)
        print(f"round {r}, {most} tables, half idle: {took:.1f}s, an idle node's share {share:.2f}s", flush=True)
        for i in range(1, most + 1, 2):  # the floor's copies take the same batch, so they stay alike
            for threads in (1, THREADS):
                hand_apply(spark, landing, schema, i, n=n, threads=threads)

    report(seconds, counts, idle_shares)
    return 0


def _spark(dbt, schema: str, landing: Path):
    """dbt's Spark session, started by a first query of this process (not inside a timed run)."""
    dbt(schema, landing, "show", "--inline", "select 1")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()  # dbt's, which the query above started
    spark.sql(f"create schema if not exists `{schema}`")
    return spark


def _dbt_run(dbt, schema: str, landing: Path, tables: int) -> tuple[float, dict[str, float]]:
    began = time.perf_counter()
    result = dbt(schema, landing, "run", "--select", *[model(i) for i in range(1, tables + 1)])
    took = time.perf_counter() - began
    return took, {r.node.name: float(r.execution_time) for r in result.result.results}


def _floor(spark, landing: Path, schema: str, tables: int, n: int) -> float:
    """The faster of one table at a time and THREADS at once, each on copies of its own."""
    times = []
    for threads in (1, THREADS):
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(partial(hand_apply, spark, landing, schema, n=n, threads=threads), range(1, tables + 1)))
        times.append(time.perf_counter() - began)
    return min(times)


def report(seconds: dict[tuple[str, int], list[float]], counts: list[int], idle_shares: list[float]) -> None:
    print("\nsync_of_many_tables: one `dbt run` of the history models against the hand-written floor")
    print(f"{'tables':>7} {'dbt run':>10} {'floor':>10} {'ratio':>6} {'dbt/table':>10} {'floor/table':>12}")
    for tables in counts:
        a, b = statistics.median(seconds["dbt", tables]), statistics.median(seconds["hand", tables])
        print(f"{tables:>7} {a:9.1f}s {b:9.1f}s {a / b:6.2f} {a / tables:9.2f}s {b / tables:11.2f}s")
    if len(counts) > 1:
        lo, hi = counts[0], counts[-1]

        def slope(name: str) -> float:
            return (statistics.median(seconds[name, hi]) - statistics.median(seconds[name, lo])) / (hi - lo)

        print(
            f"one more table ({lo} to {hi} tables): dbt {slope('dbt'):.2f}s, floor {slope('hand'):.2f}s,"
            f" ratio {slope('dbt') / slope('hand'):.2f}"
        )
    print(f"idle_table: an idle node's share of the run's wall time {statistics.median(idle_shares):.2f}s (median)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lakehistory_tools.bench.sync", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="50", help="table counts compared, comma-separated (default 50)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default $LAKEHISTORY_HOME/bench-sync)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
