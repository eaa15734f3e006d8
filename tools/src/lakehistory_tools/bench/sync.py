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
from lakehistory.landing.write import write_batch
from lakehistory.runtime.paths import local_home

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


def headline(counts: Sequence[int]) -> int:
    """The table count of the headline figures: the middle one of those measured."""
    return sorted(counts)[len(counts) // 2]


def measure(dbt, spark, meter, landing: Path, schema: str, counts: Sequence[int], runs: int, say=print) -> None:
    """The sync figures into `meter`: per round and table count, `sync_dbt_run` and `sync_floor`
    (seconds of the whole sync), `sync_slope_dbt` and `sync_slope_floor` (one more table, over the
    fewest to the most tables) and `idle_table` (an idle node's share of a run's wall time, in a
    sync of the headline count where half the tables are idle). `dbt` and `spark` are the
    benchmark's; the project must have the models of `write_project` for the most tables."""
    counts = sorted(counts)
    most, idle_of = counts[-1], headline(counts)
    spark.sql(f"create schema if not exists `{schema}`")
    for i in range(1, most + 1):
        land(landing, i, 1, range(1, HISTORY_KEYS + 1))
        land(landing, i, 2, range(1, HISTORY_KEYS + 1, 2))
    dbt(schema, landing, "run", "--select", *[model(i) for i in range(1, most + 1)])  # the history: not timed
    for i in range(1, most + 1):
        for threads in (1, THREADS):
            spark.sql(
                f"create or replace table `{schema}`.`{hand_table(i, threads)}` using delta as"
                f" select * except (`valid_from`, `valid_to`) from `{schema}`.`{model(i)}`"
            )
    n = 2
    for r in range(1, runs + 1):
        took: dict[tuple[str, int], float] = {}
        for tables in counts if r % 2 else counts[::-1]:
            n += 1
            for i in range(1, tables + 1):
                land(landing, i, n, range(r * 7 % 100 + 1, r * 7 % 100 + 1 + BATCH_KEYS))
            steps = [
                ("sync_dbt_run", partial(_dbt_run, dbt, schema, landing, tables)),
                ("sync_floor", partial(_floor, spark, landing, schema, tables, n)),
            ]
            for name, step in steps if r % 2 else steps[::-1]:
                took[name, tables] = meter.measure(name, tables, r, step, tables=tables, batch_keys=BATCH_KEYS).seconds
        if len(counts) > 1:
            lo, hi = counts[0], counts[-1]
            for name in ("dbt_run", "floor"):
                slope = (took[f"sync_{name}", hi] - took[f"sync_{name}", lo]) / (hi - lo)
                meter.record(f"sync_slope_{name.split('_')[0]}", hi, r, slope, tables=(lo, hi))
        # the idle round: a batch for every other table of the headline count
        n += 1
        for i in range(1, idle_of + 1, 2):
            land(landing, i, n, range(1, BATCH_KEYS + 1))
        nodes: dict[str, float] = {}
        wall = _dbt_run(dbt, schema, landing, idle_of, nodes)
        busy = {model(i) for i in range(1, idle_of + 1, 2)}
        idle = [s for name, s in nodes.items() if name not in busy]
        share = wall * sum(idle) / sum(nodes.values()) / len(idle)
        meter.record("idle_table", idle_of, r, share, tables=idle_of, idle_tables=len(idle), run_seconds=round(wall, 3))
        for i in range(1, idle_of + 1, 2):  # the floor's copies take the same batch, so they stay alike
            for threads in (1, THREADS):
                hand_apply(spark, landing, schema, i, n=n, threads=threads)
        say(
            f"sync round {r}: "
            + ", ".join(f"{name} of {tables} tables {s:.1f}s" for (name, tables), s in sorted(took.items()))
            + f"; {idle_of} tables, half idle, {wall:.1f}s: an idle node's share {share:.2f}s"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    counts = sorted(int(t) for t in args.tables.split(","))
    work = (args.out or local_home() / "bench-sync").resolve()
    from lakehistory_tools.bench.__main__ import fresh_project

    dbt = fresh_project(args.repository, work)
    write_project(dbt.project, counts[-1])
    schema, landing = "bench_sync", work / "landing"
    dbt(schema, landing, "show", "--inline", "select 1")  # starts dbt's Spark session, not inside a timed run
    from pyspark.sql import SparkSession

    from lakehistory_tools.bench.measure import Meter

    spark = SparkSession.builder.getOrCreate()  # dbt's, which the query above started
    meter = Meter(spark)
    measure(dbt, spark, meter, landing, schema, counts, args.runs)
    report(meter, counts)
    return 0


def _dbt_run(dbt, schema: str, landing: Path, tables: int, nodes: dict[str, float] | None = None) -> float:
    """One `dbt run` of the first `tables` history models: its wall time; each node's execution
    time into `nodes`."""
    began = time.perf_counter()
    result = dbt(schema, landing, "run", "--select", *[model(i) for i in range(1, tables + 1)])
    took = time.perf_counter() - began
    if nodes is not None:
        nodes.update({r.node.name: float(r.execution_time) for r in result.result.results})
    return took


def _floor(spark, landing: Path, schema: str, tables: int, n: int) -> float:
    """The faster of one table at a time and THREADS at once, each on copies of its own."""
    times = []
    for threads in (1, THREADS):
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(partial(hand_apply, spark, landing, schema, n=n, threads=threads), range(1, tables + 1)))
        times.append(time.perf_counter() - began)
    return min(times)


def report(meter, counts: list[int]) -> None:
    def median(name: str, tables: int | None = None) -> float:
        return statistics.median(s.seconds for s in meter.of(name, tables))

    print("\nsync_of_many_tables: one `dbt run` of the history models against the hand-written floor")
    print(f"{'tables':>7} {'dbt run':>10} {'floor':>10} {'ratio':>6} {'dbt/table':>10} {'floor/table':>12}")
    for tables in counts:
        a, b = median("sync_dbt_run", tables), median("sync_floor", tables)
        print(f"{tables:>7} {a:9.1f}s {b:9.1f}s {a / b:6.2f} {a / tables:9.2f}s {b / tables:11.2f}s")
    if len(counts) > 1:
        a, b = median("sync_slope_dbt"), median("sync_slope_floor")
        print(f"one more table ({counts[0]} to {counts[-1]} tables): dbt {a:.2f}s, floor {b:.2f}s, ratio {a / b:.2f}")
    print(f"idle_table: an idle node's share of the run's wall time {median('idle_table'):.2f}s (median)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lakehistory_tools.bench.sync", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="50", help="table counts compared, comma-separated (default 50)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default $LAKEHISTORY_HOME/bench-sync)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
