"""`python -m lakehistory_tools.bench.threads`: the demo's daily `dbt build` with one dbt thread
and with more, side by side.

    python -m lakehistory_tools.bench.threads                       # the test fixture's demo, 3 rounds
    python -m lakehistory_tools.bench.threads --scale 50 --syncs 4 --runs 1 --threads 1,4

After a query that starts Spark, every round builds the demo once per thread count, each in a
schema of its own, one day at a time as `make demo` does (land the day's sync, then `dbt build`);
within a day the thread counts take turns, in alternating order from round to round. It prints
each build's wall time, then per day the median over the rounds of every thread count and its
ratio to the first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lakehistory.runtime.paths import local_home
from lakehistory_tools.generator import GeneratorConfig, generate

EXTRACTS = ["meta_history", "meta_vars"]  # as in `make demo`: daily full extracts, captured by snapshots


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    prog, about = "python -m lakehistory_tools.bench.threads", __doc__.splitlines()[0]
    parser = argparse.ArgumentParser(prog=prog, description=about)
    parser.add_argument("--scale", type=int, default=3, help="the generator's scale (default 3, as the tests' demo)")
    parser.add_argument("--syncs", type=int, default=2, help="days built (default 2)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--threads", default="1,4", help="dbt thread counts compared, comma-separated (default 1,4)")
    parser.add_argument("--runs", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default $LAKEHISTORY_HOME/bench-threads)")
    parser.add_argument("--repository", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    config = GeneratorConfig(scale=args.scale, syncs=args.syncs, seed=args.seed)
    work = (args.out or local_home() / "bench-threads").resolve()
    from lakehistory_tools.bench.__main__ import fresh_project

    dbt = fresh_project(args.repository, work)
    # Spark starts with the first query of the process: not inside the first timed build.
    dbt("bench_threads_warm_up", work / "landing" / "warm_up", "show", "--inline", "select 1")
    seconds: dict[tuple[int, int], list[float]] = {}  # (day, threads) -> a build's wall time per round
    for r in range(1, args.runs + 1):
        order = counts if r % 2 else counts[::-1]
        for day in range(1, args.syncs + 1):
            for threads in order:
                schema = f"bench_threads_r{r}_t{threads}"
                landing = work / "landing" / schema
                generate(landing, config, extract_tables=EXTRACTS, only_sync=day)
                began = time.perf_counter()
                dbt(schema, landing, "build", "--threads", str(threads))
                took = time.perf_counter() - began
                seconds.setdefault((day, threads), []).append(took)
                print(f"round {r}, day {day}, {threads} thread(s): {took:.1f}s", flush=True)
    print(f"\nthe demo at scale {args.scale}, seed {args.seed}: median `dbt build` per day over {args.runs} round(s)")
    print(f"{'day':>4}" + "".join(f" {f'{t} thread(s)':>13} {'ratio':>6}" for t in counts))
    for day in range(1, args.syncs + 1):
        medians = [statistics.median(seconds[day, t]) for t in counts]
        print(f"{day:>4}" + "".join(f" {m:12.1f}s {m / medians[0]:6.2f}" for m in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
