"""`python -m lakehistory_tools.bench.requests`: what one `dbt run` asks of object storage.

    python -m lakehistory_tools.bench.requests                  # a 100-batch backlog, 3 small runs
    python -m lakehistory_tools.bench.requests --backlog 20 --runs 1

Starts SeaweedFS on 127.0.0.1 and puts the embedded target's warehouse and the landing in its
buckets (LAKEHISTORY_WAREHOUSE and LAKEHISTORY_LANDING, integration_tests/profiles.yml), then
runs `dbt run` of one history model of the sync benchmark's shape (sync.py), in these steps:

    first     the table's first batch (1 landed)
    backlog   BACKLOG batches pending at once (BACKLOG + 1 landed)
    small     one 5-row batch, every earlier one applied (median of RUNS runs)
    idle      nothing pending

For each it prints the S3 requests the store served during the run, by call, and the objects the
run added to the warehouse. A landing read that follows the data makes `small` cost what `first`
costs, however many batches the landing holds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from lakehistory.runtime import jars
from lakehistory_tools.bench import sync, sync_tables
from lakehistory_tools.object_store import Store, seaweedfs

WAREHOUSE = "s3a://lakehouse/warehouse"
LANDING = "s3a://landing/bench"
SCHEMA = "bench_requests"
KEYS = range(1, sync.HISTORY_KEYS + 1)


def measure(store: Store, dbt, local: Path, backlog: int, runs: int) -> list[tuple[str, int, Counter[str], int]]:
    """(step, batches landed, requests by call, objects added to the warehouse) of each run."""
    steps = []
    n = 0

    def run(step: str, new: Sequence[Sequence[int]]) -> None:
        nonlocal n
        for keys in new:
            n += 1
            sync_tables.land(local, 1, n, keys)
            folder = f"{sync_tables.table(1)}/{n:06d}"
            store.upload(local / folder, f"{LANDING}/{folder}")
        before, objects = store.requests(), len(store.keys(WAREHOUSE))
        dbt(SCHEMA, LANDING, "run", "--select", sync_tables.model(1))
        steps.append((step, n, store.requests() - before, len(store.keys(WAREHOUSE)) - objects))
        print(f"{step}: {sum(steps[-1][2].values())} requests with {n} batches landed", flush=True)

    run("first", [KEYS])
    run("backlog", [range(b % 100 + 1, b % 100 + 1 + sync.BATCH_KEYS) for b in range(backlog)])
    for r in range(runs):
        run("small", [range(r * 7 % 100 + 1, r * 7 % 100 + 1 + sync.BATCH_KEYS)])
    run("idle", [])
    return steps


def report(steps: list[tuple[str, int, Counter[str], int]]) -> None:
    calls = sorted({call for _, _, requests, _ in steps for call in requests})
    print("\nrequests_per_run: the S3 requests one `dbt run` of a history model made, by call")
    print(f"{'step':<8} {'landed':>6} {'total':>6} {'objects':>8}  " + " ".join(f"{c:>14}" for c in calls))
    shown: dict[str, list] = {}
    for step, landed, requests, objects in steps:
        shown.setdefault(step, []).append((landed, requests, objects))
    for step, rows in shown.items():
        landed = rows[-1][0]
        total = statistics.median(sum(r.values()) for _, r, _ in rows)
        objects = statistics.median(o for _, _, o in rows)
        per_call = [statistics.median(r[c] for _, r, _ in rows) for c in calls]
        print(f"{step:<8} {landed:>6} {total:>6.0f} {objects:>8.0f}  " + " ".join(f"{v:>14.0f}" for v in per_call))
    first = sum(shown["first"][0][1].values())
    small = statistics.median(sum(r.values()) for _, r, _ in shown["small"])
    print(f"small / first: {small / first:.2f} (the same batch size, {shown['small'][-1][0]} against 1 landed)")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from lakehistory_tools.bench.__main__ import fresh_project

    jars.ensure(object_store=True)
    work = Path(tempfile.mkdtemp(prefix="lakehistory-bench-requests-"))
    with seaweedfs(work / "store", ("lakehouse", "landing")) as store:
        os.environ.update(store.profile_env() | {"LAKEHISTORY_WAREHOUSE": WAREHOUSE})
        dbt = fresh_project(args.repository, work / "dbt")
        sync_tables.write_project(dbt.project, 1)
        steps = measure(store, dbt, work / "landing", args.backlog, args.runs)
    report(steps)
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lakehistory_tools.bench.requests", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--backlog", type=int, default=100, help="batches pending in the backlog run (default 100)")
    parser.add_argument("--runs", type=int, default=3, help="runs of one small batch (default 3)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
