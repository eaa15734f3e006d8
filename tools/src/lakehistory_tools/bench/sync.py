"""`python -m lakehistory_tools.bench.sync`: what one sync of a connector's many tables costs.

    python -m lakehistory_tools.bench.sync                          # 10 and 30 tables, 3 rounds
    python -m lakehistory_tools.bench.sync --tables 10,50,100 --runs 3

A connector delivers a batch for each of many tables per sync, most of them small. Each table has
a history model (a few hundred rows of history, 4 to 60 columns: tables of several widths, as a
connector's are); each round lands a batch of 5 keys for every table as one sync (its manifests
name the sync and every table of it, as a connector's do) and applies them with one `dbt run` of
the history models, with the profile's threads. Each batch is a connector's mix
(sync_tables.land_varied): earliest starts, a key with two versions, an update with unmodified
cells, a delete, new versions. Side by side, in alternating order, two floors apply
the same landed files in the same Spark session, each once per round, with as many threads as
dbt and on the statement settings the product gives a small batch (one shuffle partition, no
adaptive planning), to copies of the tables in a schema of their own (`<schema>_floors`):
- today's: per table, read the CSV files, one MERGE, one INSERT, to Fivetran-shaped copies;
- the engine's, the least the product's contract needs: per table one MERGE that closes the
  current rows in transaction time and inserts their ended copies and the new versions
  (`valid_from`, `valid_to`), and one ledger insert for the whole sync (sync_floors).
At the end both floors' copies are checked to hold what the history tables hold. One more round
lands the batches without a sync (as before syncs), for the legacy path's figure, and a last one
is counted statement by statement: per busy table the product's Spark statements (dbt's own
apart), Spark jobs and seconds held under the writer lock (medians over the tables). It prints
the medians, their ratios, the cost of one more table (the slope over the table counts) and an
idle node's share of the run's wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from lakehistory.history.session import SMALL_BATCH_SETTINGS, session_conf
from lakehistory.runtime.paths import local_home
from lakehistory_tools.bench.sync_floors import (
    check_floors,
    engine_apply,
    engine_ledger,
    engine_table,
    floors,
    hand_apply,
    hand_table,
)
from lakehistory_tools.bench.sync_tables import OPEN, land_sync, model, write_project

HISTORY_KEYS = 200  # rows of each table's first batch; the second revises half of them
BATCH_KEYS = 5  # keys of each later batch (sync_tables.land_varied)
THREADS = 4  # the profile's


def headline(counts: Sequence[int]) -> int:
    """The table count of the headline figures: the middle one of those measured."""
    return sorted(counts)[len(counts) // 2]


def measure(dbt, spark, meter, landing: Path, schema: str, counts: Sequence[int], runs: int, say=print) -> None:
    """The sync figures into `meter`: per round and table count, `sync_dbt_run`, `sync_floor` and
    `sync_engine_floor` (seconds of the whole sync); `sync_slope_dbt`, `sync_slope_floor` and
    `sync_slope_engine` (one more table, over the fewest to the most tables); `idle_table` (an
    idle node's share of a run's wall time, in a sync of the headline count where half the
    tables are idle); once, `sync_legacy` (the headline count's batches landed without a sync)
    and, per busy table of a counted sync, `busy_table_statements`, `busy_table_spark_jobs` and
    `busy_table_lock_seconds`. `dbt` and `spark` are the benchmark's; the project must have the
    models of `write_project` for the most tables."""
    counts = sorted(counts)
    most, idle_of = counts[-1], headline(counts)
    spark.sql(f"create schema if not exists `{schema}`")
    every = range(1, most + 1)
    land_sync(landing, 1, every, range(1, HISTORY_KEYS + 1))
    land_sync(landing, 2, every, range(1, HISTORY_KEYS + 1, 2))
    gone: dict[int, set[int]] = {}  # each table's deleted keys, as the later batches leave them
    dbt(schema, landing, "run", "--select", *[model(i) for i in every])  # the history: not timed
    spark.sql(f"create schema if not exists `{floors(schema)}`")
    for i in every:
        spark.sql(
            f"create or replace table `{floors(schema)}`.`{hand_table(i)}` using delta as"  # the Fivetran table:
            f" select * except (`valid_from`, `valid_to`) from `{schema}`.`{model(i)}` where `valid_to` = {OPEN}"
        )
        spark.sql(
            f"create or replace table `{floors(schema)}`.`{engine_table(i)}` using delta as"
            f" select * from `{schema}`.`{model(i)}`"
        )
    spark.sql(
        f"create or replace table {engine_ledger(schema)}"
        " (`txn_id` bigint, `history_table` string, `batch_id` string) using delta"
    )
    n = 2
    names = ("dbt_run", "floor", "engine_floor")
    for r in range(1, runs + 1):
        took: dict[tuple[str, int], float] = {}
        for tables in counts if r % 2 else counts[::-1]:
            n += 1
            land_sync(landing, n, range(1, tables + 1), _keys(r), gone=gone)
            steps = [
                ("sync_dbt_run", partial(_dbt_run, dbt, schema, landing, tables)),
                ("sync_floor", partial(_floor, spark, landing, schema, tables, n)),
                ("sync_engine_floor", partial(_engine_floor, spark, landing, schema, tables, n)),
            ]
            commits = _ledger_version(spark, schema)
            for name, step in steps if r % 2 else steps[::-1]:
                took[name, tables] = meter.measure(name, tables, r, step, tables=tables, batch_keys=BATCH_KEYS).seconds
            meter.record("sync_ledger_commits", tables, r, _ledger_version(spark, schema) - commits, tables=tables)
        if len(counts) > 1:
            lo, hi = counts[0], counts[-1]
            for name, slope_name in zip(names, ("dbt", "floor", "engine")):
                slope = (took[f"sync_{name}", hi] - took[f"sync_{name}", lo]) / (hi - lo)
                meter.record(f"sync_slope_{slope_name}", hi, r, slope, tables=(lo, hi))
        # the idle round: a sync of every other table of the headline count
        n += 1
        busy_numbers = range(1, idle_of + 1, 2)
        land_sync(landing, n, busy_numbers, range(1, BATCH_KEYS + 1), gone=gone)
        nodes: dict[str, float] = {}
        wall = _dbt_run(dbt, schema, landing, idle_of, nodes)
        busy = {model(i) for i in busy_numbers}
        idle = [s for name, s in nodes.items() if name not in busy]
        share = wall * sum(idle) / sum(nodes.values()) / max(len(idle), 1)
        meter.record("idle_table", idle_of, r, share, tables=idle_of, idle_tables=len(idle), run_seconds=round(wall, 3))
        _catch_up_floors(spark, landing, schema, busy_numbers, n)
        if r == 1:  # a floor that is not the product's work fails the bench at once
            check_floors(spark, schema, most)
        say(
            f"sync round {r}: "
            + ", ".join(f"{name} of {tables} tables {s:.1f}s" for (name, tables), s in sorted(took.items()))
            + f"; {idle_of} tables, half idle, {wall:.1f}s: an idle node's share {share:.2f}s"
        )
    # the legacy round: the headline count's batches of their own, as before syncs
    n += 1
    land_sync(landing, n, range(1, idle_of + 1), _keys(runs + 1), in_sync=False, gone=gone)
    legacy = meter.measure("sync_legacy", idle_of, 1, partial(_dbt_run, dbt, schema, landing, idle_of))
    _catch_up_floors(spark, landing, schema, range(1, idle_of + 1), n)
    # the counted round: one more sync of the headline count, statement by statement
    n += 1
    land_sync(landing, n, range(1, idle_of + 1), _keys(runs + 2), gone=gone)
    per_table = _counted_run(dbt, spark, schema, landing, idle_of, landing.parent / "counted_sync.txt")
    for name, values in per_table.items():
        for at, value in enumerate(values, start=1):
            meter.record(name, idle_of, at, value, tables=idle_of)
    _catch_up_floors(spark, landing, schema, range(1, idle_of + 1), n)
    check_floors(spark, schema, most)
    say(
        f"legacy (no sync) {idle_of} tables {legacy.seconds:.1f}s; per busy table (medians): "
        + ", ".join(f"{name} {statistics.median(v):.2f}" for name, v in per_table.items())
    )


def _keys(r: int) -> range:
    return range(r * 7 % 100 + 1, r * 7 % 100 + 1 + BATCH_KEYS)


def _catch_up_floors(spark, landing: Path, schema: str, numbers: Sequence[int], n: int) -> None:
    """The floors' copies take batch n too (untimed), so they stay alike."""
    with session_conf(spark, SMALL_BATCH_SETTINGS):
        for i in numbers:
            hand_apply(spark, landing, schema, i, n=n)
            engine_apply(spark, landing, schema, i, n=n)


def _counted_run(dbt, spark, schema: str, landing: Path, tables: int, listing: Path) -> dict[str, list[float]]:
    """One `dbt run` of the first `tables` history models, on one dbt thread, with every Spark
    statement recorded (statements.Recorder) and the writer lock's turns timed: per node, its
    statements, Spark jobs and seconds its thread held the turn (what the other threads of a run
    wait for). A node's are those its thread ran between its start and end; the run's shared
    reads fall to the node that made them first, which the medians leave aside. Each node's
    statements and turns are listed in `listing`."""
    from lakehistory.history import lock
    from lakehistory_tools.bench.statements import Recorder

    recorder = Recorder(spark)
    turns = _TurnClock(lock)
    recorder.install()
    turns.install()
    try:
        # one dbt thread: every job the status store lists in a node's span is the node's own
        result = dbt(schema, landing, "run", "--threads", "1", "--select", *[model(i) for i in range(1, tables + 1)])
    finally:
        recorder.uninstall()
        turns.uninstall()
    lines: list[str] = []
    figures: dict[str, list[float]] = {
        "busy_table_statements": [],
        "busy_table_spark_jobs": [],
        "busy_table_lock_seconds": [],
        "busy_table_dbt_statements": [],
    }
    for r in result.result.results:
        spans = [t for t in r.timing if t.started_at and t.completed_at]  # compile (the staging) and execute
        if not spans:
            continue
        began, ended = min(t.started_at.timestamp() for t in spans), max(t.completed_at.timestamp() for t in spans)
        mine = [a for a in recorder.actions if a.thread == r.thread_id and began <= a.wall <= ended]
        product = [a for a in mine if a.where != "dbt"]  # dbt's own (its listings, its hooks) apart
        figures["busy_table_statements"].append(len(product))
        figures["busy_table_spark_jobs"].append(sum(a.jobs for a in product))
        figures["busy_table_lock_seconds"].append(turns.held(r.thread_id, began, ended))
        figures["busy_table_dbt_statements"].append(len(mine) - len(product))
        lines.append(
            f"{r.node.name}: {ended - began:.2f}s, {len(product)} statements of the product's and"
            f" {len(mine) - len(product)} of dbt's, {sum(a.jobs for a in product)} jobs,"
            f" {figures['busy_table_lock_seconds'][-1]:.2f}s held"
        )
        lines += [f"  {a.wall - began:6.2f} {a.seconds:6.2f} {a.jobs:3d}  {a.where:<40} {a.what}" for a in mine]
        lines += [
            f"  {start - began:6.2f} {end - start:6.2f} {'turn' if sign > 0 else 'outside the turn'}"
            for name, start, end, sign in turns.spans
            if name == r.thread_id and began <= start <= ended
        ]
    listing.write_text("\n".join(lines) + "\n")
    return figures


class _TurnClock:
    """Times each dbt thread's turns under the writer lock (lock.holding), less what it spent
    committing outside the turn (lock.writing_outside_turn; a checkout from before it commits in
    its turn)."""

    def __init__(self, lock) -> None:
        import contextlib

        self.lock = lock
        self.spans: list[tuple[str, float, float, int]] = []  # thread, start, end, +1 held / -1 outside
        self._originals = (lock.holding, getattr(lock, "writing_outside_turn", lambda target: contextlib.nullcontext()))

    def install(self) -> None:
        import contextlib
        import threading

        holding, outside = self._originals
        spans = self.spans

        def timed(original, sign):
            @contextlib.contextmanager
            def wrapper(*args, **kwargs):
                with original(*args, **kwargs):
                    began = time.time()
                    try:
                        yield
                    finally:
                        spans.append((threading.current_thread().name, began, time.time(), sign))

            return wrapper

        self.lock.holding, self.lock.writing_outside_turn = timed(holding, 1), timed(outside, -1)

    def uninstall(self) -> None:
        self.lock.holding, self.lock.writing_outside_turn = self._originals

    def held(self, thread: str, began: float, ended: float) -> float:
        return sum(
            sign * (end - start) for name, start, end, sign in self.spans if name == thread and began <= start <= ended
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


def _ledger_version(spark, schema: str) -> int:
    """The transactions table's last Delta version: the run's reservations and records between two."""
    return int(spark.sql(f"describe history `{schema}`.`lakehistory_transactions` limit 1").collect()[0].version)


def _floor(spark, landing: Path, schema: str, tables: int, n: int) -> float:
    """Today's floor: each table's batch applied by hand, THREADS tables at once (as dbt's threads),
    on the statement settings the product gives a small batch."""
    began = time.perf_counter()
    with session_conf(spark, SMALL_BATCH_SETTINGS), ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(partial(hand_apply, spark, landing, schema, n=n), range(1, tables + 1)))
    return time.perf_counter() - began


def _engine_floor(spark, landing: Path, schema: str, tables: int, n: int) -> float:
    """The engine's floor: a MERGE per table, THREADS tables at once, then the sync's ledger rows in
    one INSERT, on the statement settings the product gives a small batch."""
    began = time.perf_counter()
    with session_conf(spark, SMALL_BATCH_SETTINGS):
        with ThreadPoolExecutor(THREADS) as pool:
            rows = list(pool.map(partial(engine_apply, spark, landing, schema, n=n), range(1, tables + 1)))
        ledger = spark.createDataFrame(rows, "txn_id bigint, history_table string, batch_id string")
        ledger.write.format("delta").mode("append").saveAsTable(engine_ledger(schema))
    return time.perf_counter() - began


def report(meter, counts: list[int]) -> None:
    def median(name: str, tables: int | None = None) -> float:
        return statistics.median(s.seconds for s in meter.of(name, tables))

    print("\nsync_of_many_tables: one `dbt run` of the history models, one sync, against the two floors")
    print(f"{'tables':>7} {'dbt run':>10} {'floor':>10} {'ratio':>6} {'engine':>10} {'ratio':>6} {'dbt/table':>10}")
    for tables in counts:
        a, b, c = median("sync_dbt_run", tables), median("sync_floor", tables), median("sync_engine_floor", tables)
        print(f"{tables:>7} {a:9.1f}s {b:9.1f}s {a / b:6.2f} {c:9.1f}s {a / c:6.2f} {a / tables:9.2f}s")
    if len(counts) > 1:
        a, b, c = median("sync_slope_dbt"), median("sync_slope_floor"), median("sync_slope_engine")
        print(
            f"one more table ({counts[0]} to {counts[-1]} tables): dbt {a:.2f}s, floor {b:.2f}s (ratio {a / b:.2f}),"
            f" engine floor {c:.2f}s (ratio {a / c:.2f})"
        )
    for tables in counts:
        commits = median("sync_ledger_commits", tables)
        print(f"the transactions table's commits in a sync of {tables} tables: {commits:.0f} (median)")
    print(f"legacy (batches of no sync), {headline(counts)} tables: {median('sync_legacy'):.1f}s")
    print(f"idle_table: an idle node's share of the run's wall time {median('idle_table'):.2f}s (median)")
    for name in (
        "busy_table_statements",
        "busy_table_spark_jobs",
        "busy_table_lock_seconds",
        "busy_table_dbt_statements",
    ):
        print(f"{name}: {median(name):.2f} (median over the busy tables of one sync)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lakehistory_tools.bench.sync", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="10,30", help="table counts compared, comma-separated (default 10,30)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default $LAKEHISTORY_HOME/bench-sync)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
