"""`python -m lakehistory_tools.bench`: run the benchmark and write its report (see __init__.py).

    python -m lakehistory_tools.bench                 # the full run: 100k, 1M and 10M rows, 5 runs each
    python -m lakehistory_tools.bench --smoke         # a tiny run that only proves every step works

Every compared pair runs in the same round, one after the other, in alternating order, so a ratio
never compares runs made at different times of a noisy machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from lakehistory.runtime.paths import local_home
from lakehistory_tools.bench import sync, sync_tables, workload
from lakehistory_tools.bench.measure import Figure, Meter, Sample, files_read
from lakehistory_tools.bench.report import memory_rows, scale_text, terminal, write_files
from lakehistory_tools.project import copy_demo_project

SNAPSHOT = "bench_obs_raw_snapshot"
HISTORY = "obs_raw_history"
OLD_VERSION = 4  # a synthetic transaction: every key has one active row as of it

# The dbt snapshot users would write instead: the check strategy over every column, deletes captured.
BENCH_SOURCES = """version: 2
sources:
  - name: bench
    description: The benchmark's stand-in for a source table a dbt snapshot captures.
    schema: "{{ target.schema }}"
    tables:
      - name: obs_raw_state
        description: Current observations, one row per obs_raw_id.
"""
BENCH_SNAPSHOT = f"""version: 2
snapshots:
  - name: {SNAPSHOT}
    description: The same changes captured by a plain dbt snapshot, for comparison.
    relation: source('bench', 'obs_raw_state')
    config:
      unique_key: {workload.KEY}
      strategy: check
      check_cols: all
      hard_deletes: new_record
"""


class BenchError(RuntimeError):
    pass


class Dbt:
    """dbt in this process, on the benchmark's copy of the project; one schema per table size."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def __call__(self, schema: str, landing: Path, *args: str):
        from dbt.cli.main import dbtRunner

        os.environ["LAKEHISTORY_SCHEMA"] = schema
        os.environ["LAKEHISTORY_LANDING"] = str(landing)
        p = str(self.project)
        result = dbtRunner().invoke(
            # --quiet: the benchmark prints its own progress; dbt's full log is in project/logs/dbt.log
            [*args, "--quiet", "--project-dir", p, "--profiles-dir", p, "--target-path", f"{p}/target"]
            + ["--log-path", f"{p}/logs"]
        )
        if not result.success:
            raise BenchError(f"dbt {' '.join(args)} failed in schema {schema}: {result.exception or _messages(result)}")
        return result

    def deps(self) -> None:
        """Install the package into the copy (`dbt deps`: a link to the checkout)."""
        from dbt.cli.main import dbtRunner

        result = dbtRunner().invoke(["deps", "--quiet", "--project-dir", str(self.project)])
        if not result.success:
            raise BenchError(f"dbt deps failed in {self.project}: {result.exception or _messages(result)}")

    def node_seconds(self, schema: str, landing: Path, command: str, node: str) -> float:
        result = self(schema, landing, command, "--select", node)
        for r in result.result.results:
            if r.node.name == node:
                return float(r.execution_time)
        raise BenchError(f"dbt {command} did not run {node}")

    def compile(self, schema: str, landing: Path, sql: str) -> str:
        return self(schema, landing, "compile", "--inline", sql).result.results[0].node.compiled_code


def fresh_project(repository: Path, work: Path, time_zone: str = "UTC") -> Dbt:
    """dbt on a copy of the demo project (package installed) in the emptied folder `work`, whose
    lakehouse this process uses from now on: for the narrower tools beside the benchmark. The
    process, and the Spark it starts, run in `time_zone`, as on a machine set to it."""
    shutil.rmtree(work, ignore_errors=True)
    os.environ["LAKEHISTORY_LAKEHOUSE"] = str(work / "lakehouse")
    os.environ["TZ"] = time_zone
    time.tzset()
    dbt = Dbt(copy_demo_project(repository, work / "project"))
    dbt.deps()
    return dbt


def _against_goal(name: str, question: str, samples: list[Sample], goal: float, scale: int) -> Figure:
    """A figure of one measure against a fixed goal: the ratio of its median to the goal is at most 1."""
    goals = [Sample("goal", scale, s.run, goal, 0.0, None) for s in samples]
    return Figure.compare(name, question, (name, samples), (f"the goal's {goal:g}", goals), "<= 1", lambda x: x <= 1)


def _messages(result) -> str:
    return "; ".join(f"{r.node.name}: {r.message}" for r in (result.result.results if result.result else []))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lakehistory_tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scales", default="100000,1000000,5000000,10000000", help="history table rows, comma-separated"
    )
    parser.add_argument("--batch-keys", type=int, default=10_000, help="keys each batch touches (default 10000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of every measured step (default 3)")
    parser.add_argument(
        "--compare-at",
        type=int,
        default=5_000_000,
        help="history table rows where the alternatives run (default 5000000: 1M keys, so the snapshot's"
        " source table has 1M rows)",
    )
    parser.add_argument("--small-keys", type=int, default=5, help="keys of the small batch (default 5)")
    parser.add_argument(
        "--backlog-batches", type=int, default=100, help="pending batches of the catch-up run (default 100)"
    )
    parser.add_argument("--backlog-rows", type=int, default=100, help="rows of each backlog batch (default 100)")
    parser.add_argument("--fk-children", type=int, default=10_000_000, help="child `_hx` versions (default 10M)")
    parser.add_argument("--fk-parents", type=int, default=1_000_000, help="parent `_hx` versions (default 1M)")
    parser.add_argument(
        "--sync-tables",
        default="10,30",
        help="table counts of the sync of many tables, comma-separated; the middle one is the headline (default 10,30)",
    )
    parser.add_argument("--sync-runs", type=int, default=3, help="rounds of the sync of many tables (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="result folder (default $LAKEHISTORY_HOME/bench)")
    parser.add_argument(
        "--repository", type=Path, default=Path.cwd(), help="the lakehistory checkout (default: the current folder)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny scales, one run: proves the steps work")
    args = parser.parse_args(argv)
    if args.smoke:
        args.scales, args.batch_keys, args.runs, args.compare_at = "5000,20000", 200, 1, 20000
        args.backlog_batches, args.backlog_rows = 4, 20
        args.fk_children, args.fk_parents = 20_000, 2_000
        args.sync_tables, args.sync_runs = "1,2", 1
    args.scales = sorted(int(s) for s in str(args.scales).split(","))
    args.sync_tables = sorted({int(t) for t in str(args.sync_tables).split(",")})
    if len(args.sync_tables) < 2:
        parser.error("--sync-tables needs two table counts or more: the cost of one more table is a slope")
    if args.compare_at not in args.scales:
        parser.error(f"--compare-at {args.compare_at} must be one of --scales")
    if not (args.repository / "integration_tests" / "dbt_project.yml").is_file():
        parser.error(
            f"{args.repository} has no integration_tests/dbt_project.yml: run from the checkout or pass --repository"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work = (args.out or local_home() / "bench").resolve()
    for part in ("lakehouse", "landing", "project"):
        shutil.rmtree(work / part, ignore_errors=True)
    os.environ["LAKEHISTORY_LAKEHOUSE"] = str(work / "lakehouse")
    os.environ["TZ"] = "UTC"
    time.tzset()
    project = copy_demo_project(args.repository, work / "project")
    (project / "models" / "bench").mkdir()
    (project / "models" / "bench" / "_bench__sources.yml").write_text(BENCH_SOURCES)
    (project / "snapshots" / "bench__snapshots.yml").write_text(BENCH_SNAPSHOT)
    sync_tables.write_project(project, args.sync_tables[-1])
    dbt = Dbt(project)
    dbt.deps()
    started = time.perf_counter()

    def say(text: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {text}", flush=True)

    # -- inputs: one history table per size, built through the product, then filled set-based --------
    sizes = {rows: f"bench_{scale_text(rows).lower()}" for rows in args.scales}
    plans = {rows: workload.BatchPlan(workload.keys_for(rows), args.batch_keys) for rows in args.scales}
    for plan in plans.values():
        plan.check(args.runs)
    spark = None
    backlog_schema = "bench_backlog"
    for rows, schema in [*sizes.items(), (args.scales[0], backlog_schema)]:
        landing = work / "landing" / schema
        workload.land_first_batch(landing)
        dbt(schema, landing, "run", "--select", HISTORY)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        workload.fill_history(spark, schema, rows)
        if rows == args.compare_at and schema != backlog_schema:
            fivetran = workload.make_fivetran_copy(spark, schema, rows)
            workload.make_snapshot_source(spark, schema)
            dbt(schema, landing, "snapshot", "--select", SNAPSHOT)
        say(f"{schema}: history table of {rows} rows ({workload.keys_for(rows)} keys) ready")
    assert spark is not None
    meter = Meter(spark)

    # -- 1-3: one batch per round and size; at --compare-at also by hand and by a dbt snapshot --------
    for r in range(1, args.runs + 1):
        for rows, schema in sizes.items():
            landing = work / "landing" / schema
            workload.land_round(landing, plans[rows], r)
            staged = workload.read_landed_batch(spark, landing, f"bench-{r:04d}")
            steps: list[tuple[str, Callable[[], object]]] = [
                ("batch_cost", partial(dbt.node_seconds, schema, landing, "run", HISTORY))
            ]
            if rows == args.compare_at:
                steps.append(("hand_written", partial(workload.apply_by_hand, spark, staged, fivetran)))
            for measure, step in steps if r % 2 else reversed(steps):
                meter.measure(measure, rows, r, step, batch_keys=args.batch_keys)
            if rows == args.compare_at:
                workload.change_snapshot_source(spark, schema, staged)
                # A small batch: the fixed cost of a run, against the same batch applied by hand.
                workload.land_small_round(landing, plans[rows], r, args.small_keys)
                small = workload.read_landed_batch(spark, landing, f"bench-{r:04d}-small")
                steps = [
                    ("small_batch", partial(dbt.node_seconds, schema, landing, "run", HISTORY)),
                    ("small_hand_written", partial(workload.apply_by_hand, spark, small, fivetran)),
                ]
                for measure, step in steps if r % 2 else reversed(steps):
                    meter.measure(measure, rows, r, step, batch_keys=args.small_keys)
                workload.change_snapshot_source(spark, schema, small)
                meter.measure(
                    "dbt_snapshot",
                    rows,
                    r,
                    partial(dbt.node_seconds, schema, landing, "snapshot", SNAPSHOT),
                    batch_keys=args.batch_keys,
                )
        # A backlog of pending batches applied by one run, against one such batch (in batch order:
        # the one measured first lands first).
        landing = work / "landing" / backlog_schema
        pair = [("catch_up", args.backlog_batches), ("one_batch", 1)]
        first = r * (args.backlog_batches + 1)
        for measure, count in pair if r % 2 else reversed(pair):
            workload.land_backlog(landing, workload.keys_for(args.scales[0]), r, first, count, args.backlog_rows)
            first += count
            meter.measure(
                measure,
                args.scales[0],
                r,
                partial(dbt.node_seconds, backlog_schema, landing, "run", HISTORY),
                batches=count,
                batch_rows=args.backlog_rows,
            )
        done = [f"{s.measure}@{scale_text(s.scale)} {s.seconds:.2f}s" for s in meter.samples if s.run == r]
        say(f"round {r}: " + ", ".join(done))

    # The compared pipelines must have made the same tables, or the comparison means nothing.
    schema = sizes[args.compare_at]
    history = f"`{schema}`.`{HISTORY}`"
    current = f"select {workload.FIVETRAN_COLUMNS} from {history} where `valid_to` = {workload.OPEN}L"
    by_hand = workload.differences(spark, current, f"select {workload.FIVETRAN_COLUMNS} from {fivetran}")
    by_snapshot = workload.differences(
        spark,
        f"select {workload.DATA_COLUMNS} from ({current}) where `_fivetran_active`",
        f"select {workload.DATA_COLUMNS} from `{schema}`.`{SNAPSHOT}`"
        " where `dbt_valid_to` is null and coalesce(`dbt_is_deleted`, 'False') = 'False'",
    )
    if by_hand or by_snapshot:
        raise BenchError(
            f"the compared tables differ at {args.compare_at} rows: {by_hand} rows between the history table's"
            f" current rows and the hand-written table, {by_snapshot} between its active rows and the snapshot's"
        )
    say("the history table, the hand-written table and the snapshot hold the same current rows")

    # -- 4: history foreign keys, the as-of join of the `_hx` models against a plain equi-join --------
    from lakehistory.hx import ForeignKey, resolve_foreign_key

    fk_schema = sizes[args.scales[0]]
    child_table, parent_table = workload.make_fk_inputs(spark, fk_schema, args.fk_children, args.fk_parents)

    def resolve() -> None:
        fk = ForeignKey(("history_id",), "meta_history", ("history_id",), spark.table(parent_table))
        children = spark.table(child_table).drop("parent_version_id")
        # As a first build resolves them: 10M child versions are the whole child table.
        resolved = resolve_foreign_key(children, fk, narrow=False)
        resolved.write.format("noop").mode("overwrite").save()

    def equi_join() -> None:
        parents = spark.table(parent_table).select("meta_history_hx_id")
        children = spark.table(child_table)
        joined = children.join(parents, children["parent_version_id"] == parents["meta_history_hx_id"], "left")
        joined.drop("parent_version_id").write.format("noop").mode("overwrite").save()

    for r in range(1, args.runs + 1):
        pair = [("fk_resolution", resolve), ("fk_equi_join", equi_join)]
        for measure, step in pair if r % 2 else reversed(pair):
            meter.measure(measure, args.fk_children, r, step, parents=args.fk_parents)
    say("history foreign keys: " + ", ".join(f"{s.measure} {s.seconds:.2f}s" for s in meter.samples[-2 * args.runs :]))

    # -- 5: as of an old version against the current state, on the largest table -----------------------
    largest = args.scales[-1]
    schema, landing = sizes[largest], work / "landing" / sizes[largest]
    query = "select count(*) as n, sum(`datum`) as total from {} where `_fivetran_active`"
    as_of = f"lakehistory.as_of(ref('{HISTORY}'), {OLD_VERSION})"
    old_sql = dbt.compile(schema, landing, query.format("{{ " + as_of + " }}"))
    now_sql = dbt.compile(schema, landing, query.format("{{ lakehistory.current(ref('" + HISTORY + "')) }}"))
    total_files = spark.sql(f"describe detail `{schema}`.`{HISTORY}`").collect()[0]["numFiles"]
    counts = {name: spark.sql(sql).collect()[0]["n"] for name, sql in (("as_of", old_sql), ("current", now_sql))}
    read = {name: files_read(spark, sql) for name, sql in (("as_of", old_sql), ("current", now_sql))}
    for r in range(1, args.runs + 1):
        queries = [("as_of_old", old_sql, "as_of"), ("current_state", now_sql, "current")]
        for measure, sql, name in queries if r % 2 else reversed(queries):
            meter.measure(
                measure,
                largest,
                r,
                partial(spark.sql(sql).collect),
                rows_returned=counts[name],
                files_read=read[name],
                files_total=total_files,
            )
    say(f"as-of: {counts} active rows, files read {read} of {total_files}")

    # -- 6: a sync of many tables, one small batch each, by one `dbt run`, against the floor -----------
    sync.measure(dbt, spark, meter, work / "landing" / "sync", "bench_sync", args.sync_tables, args.sync_runs, say)
    headline, fewest, most = sync.headline(args.sync_tables), args.sync_tables[0], args.sync_tables[-1]

    # -- figures -------------------------------------------------------------------------------------
    small, big = args.scales[0], args.scales[-1]
    compare_keys = plans[args.compare_at].keys
    figures = [
        Figure.compare(
            "batch_cost_growth",
            f"Does a {args.batch_keys}-key batch cost the same in a big table as in a small one?",
            (f"merge into {scale_text(big)} rows", meter.of("batch_cost", big)),
            (f"merge into {scale_text(small)} rows", meter.of("batch_cost", small)),
            "<= 1.5",
            lambda x: x <= 1.5,
        ),
        Figure.compare(
            "small_batch_vs_hand_written",
            f"A {args.small_keys}-row batch through the history node, against the same batch applied by"
            f" hand-written PySpark, at {scale_text(args.compare_at)} history rows",
            ("lakehistory (dbt node)", meter.of("small_batch", args.compare_at)),
            ("hand-written MERGE + INSERT", meter.of("small_hand_written", args.compare_at)),
            "<= 2",
            lambda x: x <= 2,
        ),
        Figure.compare(
            "catch_up_vs_one_batch",
            f"{args.backlog_batches} pending batches of {args.backlog_rows} rows applied by one run, against"
            " one such batch",
            (f"{args.backlog_batches} batches, one run", meter.of("catch_up")),
            ("one batch", meter.of("one_batch")),
            "<= 5",
            lambda x: x <= 5,
        ),
        Figure.compare(
            "vs_dbt_snapshot",
            f"How much faster than a dbt snapshot of the same changes, at {scale_text(compare_keys)} source rows"
            f" ({scale_text(args.compare_at)} history rows)?",
            ("dbt snapshot (check, hard deletes)", meter.of("dbt_snapshot", args.compare_at)),
            ("lakehistory merge", meter.of("batch_cost", args.compare_at)),
            ">= 3",
            lambda x: x >= 3,
        ),
        Figure.compare(
            "vs_hand_written",
            f"How close to the shortest hand-written PySpark, at {scale_text(args.compare_at)} history rows?",
            ("lakehistory merge (dbt node)", meter.of("batch_cost", args.compare_at)),
            ("hand-written MERGE + INSERT", meter.of("hand_written", args.compare_at)),
            "<= 1.3",
            lambda x: x <= 1.3,
        ),
        Figure.compare(
            "history_fk",
            f"History FKs of {scale_text(args.fk_children)} children over {scale_text(args.fk_parents)} parent"
            " versions, against an equi-join of the same sizes",
            ("as-of join (resolve_foreign_key)", meter.of("fk_resolution")),
            ("equi-join", meter.of("fk_equi_join")),
            "<= 2",
            lambda x: x <= 2,
        ),
        Figure.compare(
            "as_of_vs_current",
            f"An as-of query at version {OLD_VERSION} against the current state, {scale_text(largest)} rows",
            (f"as of {OLD_VERSION} ({counts['as_of']} rows)", meter.of("as_of_old")),
            (f"current ({counts['current']} rows)", meter.of("current_state")),
            "<= 2",
            lambda x: x <= 2,
            note=f"files read: as of {read['as_of']}/{total_files} (skipped {1 - read['as_of'] / total_files:.0%}),"
            f" current {read['current']}/{total_files} (skipped {1 - read['current'] / total_files:.0%})",
        ),
        Figure.compare(
            "sync_of_many_tables",
            f"A sync of {headline} tables of 4 to 60 columns, a batch of {sync.BATCH_KEYS} keys each, applied by one"
            f" `dbt run` of their history models ({sync.THREADS} threads), against today's floor: the same batches"
            " read, MERGEd and INSERTed by hand in one session",
            (f"dbt run of {headline} history models", meter.of("sync_dbt_run", headline)),
            ("hand-written read, MERGE, INSERT per table", meter.of("sync_floor", headline)),
            "<= 2",
            lambda x: x <= 2,
            note=f"the same tables' batches of no sync (legacy), once: {meter.of('sync_legacy')[0].seconds:.1f}s",
        ),
        Figure.compare(
            "sync_vs_engine_floor",
            f"The same sync of {headline} tables against the engine's floor: one MERGE per table that closes and"
            " inserts, and one ledger INSERT for the sync",
            (f"dbt run of {headline} history models", meter.of("sync_dbt_run", headline)),
            ("one MERGE per table, one ledger INSERT", meter.of("sync_engine_floor", headline)),
            "<= 2.5",
            lambda x: x <= 2.5,
        ),
        Figure.compare(
            "sync_table_marginal",
            f"What one more table adds to a sync (the slope from {fewest} to {most} tables), against today's floor's",
            ("one more history model", meter.of("sync_slope_dbt")),
            ("one more table by hand", meter.of("sync_slope_floor")),
            "<= 1.5",
            lambda x: x <= 1.5,
        ),
        _against_goal(
            "idle_table",
            f"A history node with nothing pending, in a sync of {headline} tables where half have a batch: its"
            " share of the run's wall time, in seconds",
            meter.of("idle_table"),
            0.3,
            headline,
        ),
        _against_goal(
            "busy_table_statements",
            f"The Spark statements of a busy history node (a batch of {sync.BATCH_KEYS} keys of a sync of {headline}"
            " tables, one dbt thread), median over the tables",
            meter.of("busy_table_statements"),
            8,
            headline,
        ),
        _against_goal(
            "busy_table_spark_jobs",
            "The Spark jobs of the same busy node, median over the tables",
            meter.of("busy_table_spark_jobs"),
            20,
            headline,
        ),
        _against_goal(
            "busy_table_lock_seconds",
            "The seconds the same busy node holds the writer lock's turn (what the run's other threads wait for),"
            " median over the tables",
            meter.of("busy_table_lock_seconds"),
            0.3,
            headline,
        ),
    ]
    memory = memory_rows(meter.samples)
    driver, partitions = spark.conf.get("spark.driver.memory", "?"), spark.conf.get("spark.sql.shuffle.partitions")
    codegen, adaptive = spark.conf.get("spark.sql.codegen.wholeStage"), spark.conf.get("spark.sql.adaptive.enabled")
    expressions = spark.conf.get("spark.sql.codegen.factoryMode")  # NO_CODEGEN: interpreted (tiny-data mode)
    notes = [
        f"driver memory setting {driver}; local[2]; {partitions} shuffle partitions;"
        f" whole-stage codegen {codegen}; expression codegen {expressions}; adaptive execution {adaptive};"
        f" JVM flags {os.environ.get('LAKEHISTORY_JAVA_OPTIONS') or 'none of ours'}",
        f"largest scale run: {scale_text(largest)} history rows, {scale_text(args.fk_children)} x"
        f" {scale_text(args.fk_parents)} history FKs; peak JVM heap of all steps"
        f" {max(m['heap_peak_mib'] for m in memory):.0f} MiB",
        f"total time {time.perf_counter() - started:.0f}s",
    ]
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    print(terminal(figures, memory, notes))
    for path in write_files(work, config, meter.samples, figures, memory, notes):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
