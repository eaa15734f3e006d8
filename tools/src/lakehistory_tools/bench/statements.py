"""`python -m lakehistory_tools.bench.statements`: where one history run spends its time.

    python -m lakehistory_tools.bench.statements              # a 5-row batch on a 100k-row history table
    python -m lakehistory_tools.bench.statements --rows 1000000 --batch-keys 10000 --runs 3
    python -m lakehistory_tools.bench.statements --idle      # the last run finds nothing pending

Builds the benchmark's `obs_raw_history` table, then lands a small batch per run and runs the
node through dbt. Every Spark action of the run (a query whose rows reach Python, a local
checkpoint, a SQL command, the MERGE) is timed and listed in order with the function of the
product that ran it, its Spark jobs (`log`: those of them that read a Delta table's log, for the
table's state after a commit or the files a query reads), the time they ran (the rest of the
action's time is the driver's: planning, Delta's log and commit) and, for queries, a summary of
its physical plan (shuffles, joins, windows, tables scanned): the statements a batch costs, and
what each costs.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from lakehistory.runtime.paths import local_home
from lakehistory_tools.bench import workload

HISTORY = "obs_raw_history"
# How Delta labels the jobs that read a table's log: its state after a commit, the files a query reads.
DELTA_LOG_JOBS = ("Delta: Compute snapshot", "Delta: Filtering files")
PLAN_NODES = ("Exchange", "SortMergeJoin", "BroadcastHashJoin", "BroadcastNestedLoopJoin", "Window", "Scan parquet")


@dataclass
class Action:
    where: str  # the product function that ran it
    what: str  # collect, localCheckpoint, sql, merge, ...
    started: float  # time.perf_counter() when it began
    seconds: float
    jobs: int
    busy: float  # seconds in which at least one of its jobs ran
    log_jobs: int = 0  # of its jobs, those that read a Delta table's log (DELTA_LOG_JOBS)
    plan: str = ""
    thread: str = ""  # the Python thread that ran it (a dbt thread: the node's)
    wall: float = 0.0  # time.time() when it began
    job_names: list[str] = field(default_factory=list)  # each job's description (or call site), in order


@dataclass
class Recorder:
    """Times the PySpark calls that run Spark jobs (classic PySpark, the embedded session)."""

    spark: Any
    explain: Path | None = None  # where to append each query's full physical plan
    actions: list[Action] = field(default_factory=list)
    overhead: float = 0.0  # seconds of the recorder's own bookkeeping, inside the node's time
    _depth: threading.local = field(default_factory=threading.local)
    _originals: list[tuple[Any, str, Any]] = field(default_factory=list)

    def _store(self):
        return self.spark.sparkContext._jsc.sc().statusStore()

    def _job_count(self) -> int:
        """One past the newest job's id (the status store lists its jobs newest first, and keeps
        the last spark.ui.retainedJobs only: their number stops growing in a long session)."""
        jobs = self._store().jobsList(None)
        return int(jobs.apply(0).jobId()) + 1 if jobs.size() else 0

    def _jobs_since(self, first_job: int) -> list[Any]:
        """The jobs from id `first_job` on: a walk of the few newest only."""
        jobs = self._store().jobsList(None)
        found = []
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.jobId() < first_job:
                break
            found.append(job)
        return found[::-1]

    @staticmethod
    def _busy(jobs: list[Any]) -> float:
        """Seconds in which at least one of `jobs` ran."""
        spans = []
        for job in jobs:
            if job.completionTime().isDefined() and job.submissionTime().isDefined():
                spans.append((job.submissionTime().get().getTime(), job.completionTime().get().getTime()))
        busy, end = 0, 0
        for start, stop in sorted(spans):
            busy += max(0, stop - max(start, end))
            end = max(end, stop)
        return busy / 1000

    @staticmethod
    def _names(jobs: list[Any]) -> list[str]:
        """What each of `jobs` did: its description (Delta names its own jobs) or its call site."""
        named = []
        for job in jobs:
            what = str(job.description().get()) if job.description().isDefined() else str(job.name())
            # Spark's listener bus updates the status store after the action returns: a job may
            # not show its completion yet (nor, in a run of several threads, another's its start).
            ended, started = job.completionTime(), job.submissionTime()
            took = (
                f"{(ended.get().getTime() - started.get().getTime()) / 1000:.2f}s"
                if ended.isDefined() and started.isDefined()
                else "running"
            )
            named.append(f"{took}, {job.stageIds().size()} stage(s): {' '.join(what.split())}")
        return named

    @staticmethod
    def _log_jobs(jobs: list[Any]) -> int:
        """Those of `jobs` that read a Delta table's log (DELTA_LOG_JOBS)."""
        descriptions = (job.description() for job in jobs)
        return sum(1 for d in descriptions if d.isDefined() and str(d.get()).startswith(DELTA_LOG_JOBS))

    def install(self) -> None:
        from pyspark.sql import SparkSession
        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.merge import MergeIntoWriter

        for owner, name in (
            (DataFrame, "collect"),
            (DataFrame, "first"),
            (DataFrame, "localCheckpoint"),
            (DataFrame, "count"),
            (MergeIntoWriter, "merge"),
            (SparkSession, "sql"),
        ):
            self._originals.append((owner, name, getattr(owner, name)))
            setattr(owner, name, self._wrap(getattr(owner, name), name))

    def uninstall(self) -> None:
        for owner, name, original in self._originals:
            setattr(owner, name, original)
        self._originals.clear()

    def _wrap(self, call, name: str):
        recorder = self

        def timed(target, *args, **kwargs):
            depth = getattr(recorder._depth, "n", 0)
            if depth:  # an action inside another (e.g. `first` calls `collect`), in this thread
                return call(target, *args, **kwargs)
            recorder._depth.n = 1
            counting, wall = time.perf_counter(), time.time()
            jobs = recorder._job_count()
            started = time.perf_counter()
            try:
                result = call(target, *args, **kwargs)
            finally:
                recorder._depth.n = 0
            ended = time.perf_counter()
            seconds, first_job = ended - started, jobs
            jobs = recorder._job_count() - first_job
            # `spark.sql` runs a command (DDL, INSERT, DESCRIBE) at once; a query only when acted on
            if name != "sql" or jobs or seconds > 0.05:
                # (a query's plan once it ran: planning one here would add its cost to the next gap)
                plan = _plan_summary(target, recorder.explain) if name not in ("sql", "merge") else ""
                text = " ".join(str(args[0]).split())[:60] if name == "sql" and args else name
                ran = recorder._jobs_since(first_job) if jobs else []  # one walk of the job list
                busy, log_jobs = recorder._busy(ran), recorder._log_jobs(ran)
                thread = threading.current_thread().name
                names = recorder._names(ran)
                recorder.actions.append(
                    Action(_caller(), text, started, seconds, jobs, busy, log_jobs, plan, thread, wall, names)
                )
            recorder.overhead += (started - counting) + (time.perf_counter() - ended)
            return result

        return timed


def _caller() -> str:
    """The innermost function of the product (not of the bench or PySpark) on the stack. A walk
    of the frames, not `inspect.stack()`, which reads each frame's source file and cost more
    than the statements it named."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("lakehistory.") and not module.startswith("lakehistory_tools.bench"):
            return f"{module.removeprefix('lakehistory.')}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "dbt"


def _plan_summary(frame, explain: Path | None) -> str:
    try:
        plan = frame._jdf.queryExecution().executedPlan().toString()
    except Exception:
        return ""
    if explain is not None:
        with explain.open("a") as out:
            out.write(f"== {_caller()} ==\n{plan}\n")
    # an adaptive plan prints its final plan and then its initial one: count the final one
    plan = plan.split("== Initial Plan ==")[0]
    counts = {node: plan.count(node) for node in PLAN_NODES}
    return ", ".join(f"{n} {node.lower().replace('scan parquet', 'scans')}" for node, n in counts.items() if n)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lakehistory_tools.bench.statements", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=100_000, help="history table rows (default 100000)")
    parser.add_argument("--batch-keys", type=int, default=5, help="keys of each batch (default 5)")
    parser.add_argument("--runs", type=int, default=2, help="batches, one run each; the last is listed (default 2)")
    parser.add_argument("--idle", action="store_true", help="land nothing for the last run: an idle node's statements")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default $LAKEHISTORY_HOME/statements)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the lakehistory checkout (default: here)")
    parser.add_argument("--jobs", action="store_true", help="list each statement's Spark jobs under it")
    parser.add_argument(
        "--time-zone", default="UTC", help="the time zone of the machine dbt runs on, e.g. Europe/Berlin (default UTC)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work = (args.out or local_home() / "statements").resolve()
    from lakehistory_tools.bench.__main__ import fresh_project

    dbt = fresh_project(args.repository, work, args.time_zone)
    schema, landing = "bench_statements", work / "landing"
    workload.land_first_batch(landing)
    dbt(schema, landing, "run", "--select", HISTORY)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    workload.fill_history(spark, schema, args.rows)
    plan = workload.BatchPlan(workload.keys_for(args.rows), args.batch_keys)
    recorder = Recorder(spark, work / "plans.txt")
    recorder.install()
    for r in range(1, args.runs + 1):
        if not (args.idle and r == args.runs):
            workload.land_small_round(landing, plan, r, args.batch_keys)
        recorder.actions.clear()
        recorder.overhead = 0.0
        if recorder.explain is not None:
            recorder.explain.unlink(missing_ok=True)
        began = time.perf_counter()
        node = dbt.node_seconds(schema, landing, "run", HISTORY)
        jobs = sum(a.jobs for a in recorder.actions)
        log_jobs = sum(a.log_jobs for a in recorder.actions)
        statements = len(recorder.actions)
        print(
            f"run {r}: node {node:.2f}s ({recorder.overhead:.2f}s of it this tool's own bookkeeping),"
            f" {statements} statements, {jobs} Spark jobs ({log_jobs} read Delta logs)"
        )
    spent = sum(a.seconds for a in recorder.actions)
    where = f"{args.rows} rows, time zone {args.time_zone}"
    batch = "nothing pending" if args.idle else f"a {args.batch_keys}-key batch"
    print(f"{HISTORY}: {batch} on {where}, run {args.runs}: node {node:.2f}s")
    print(f"{'at':>6} {'seconds':>8} {'jobs':>4} {'log':>5} {'busy':>5}  {'function':<40} {'statement':<44} plan")
    for a in recorder.actions:
        print(
            f"{a.started - began:6.2f} {a.seconds:8.2f} {a.jobs:4d} {a.log_jobs:5d} {a.busy:5.2f}"
            f"  {a.where:<40} {a.what:<44} {a.plan}"
        )
        for name in a.job_names if args.jobs else ():
            print(f"{'':>32}job {name[:160]}")
    busy = sum(a.busy for a in recorder.actions)
    gaps = node - spent - recorder.overhead
    print(
        f"       {spent:8.2f}            {busy:5.2f}  {len(recorder.actions)} statements; {recorder.overhead:.2f}s this"
        f" tool's bookkeeping; the other {gaps:.2f}s of the node's time is dbt and Python (the gaps between"
        " the `at` of one statement and the end of the one before)"
    )
    print(f"the physical plan of every query: {recorder.explain}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
