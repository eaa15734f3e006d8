"""`lakehistory-demo run`: the whole demo in one process, as `make demo` runs it.

Day by day, as in production: land the next sync (`lakehistory-demo generate --sync K`), then
`dbt build`; then time travel on what was built (`dbt show` of the demo's preview models) and
`lakehistory status`. Each step is the command a user would type, printed before it runs; they
run through dbt's programmatic runner in this one process, so that they share one Spark session
(one JVM start, a warm JIT and Delta's cached table states) instead of starting one each. A
second run finds every sync landed and builds once.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# The closing previews: every table's version, a consistent cut, the database as of a day; the
# same changes as events and feature states (an audit of the last transaction, a version chain).
PREVIEWS: tuple[tuple[str, int | None], ...] = (
    ("table_versions", None),
    ("stations_as_of_version", 10),
    ("observations_as_of_download", 10),
    ("last_transaction_audit", 10),
    ("station_state_chain", None),
)


def run(args: argparse.Namespace, generate) -> int:
    """The demo on the landing root and dbt project of `args`; `generate(args)` lands one sync
    (`args.sync`) and returns its exit status."""
    from lakehistory_tools.generator.land import landed_syncs

    project = ["--project-dir", str(args.project_dir), "--profiles-dir", str(args.project_dir)]
    landed = landed_syncs(args.landing, args.tables, args.extract_tables, start=args.start_date, syncs=args.syncs)
    days = list(range(landed + 1, args.syncs + 1))
    if not days and not dbt_step("build", *project):
        return 1
    for sync in days:
        print(f"$ lakehistory-demo generate --sync {sync} (of {args.syncs})", flush=True)
        if status := generate(argparse.Namespace(**{**vars(args), "sync": sync, "no_progress": True})):
            return status
        if not dbt_step("build", *project):
            return 1
    for model, limit in PREVIEWS:
        if not dbt_step("show", *project, "--select", model, *(["--limit", str(limit)] if limit else [])):
            return 1
    from lakehistory.command.cli import main as lakehistory

    print("$ lakehistory status", flush=True)
    return lakehistory(["status", *project])


def dbt_step(*arguments: str) -> bool:
    """Print a dbt command, then run it in this process."""
    from dbt.cli.main import dbtRunner

    print("$ dbt " + " ".join(arguments), flush=True)
    return bool(dbtRunner().invoke(["--no-use-colors", *arguments]).success)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=Path("integration_tests"),
        metavar="DIR",
        help="the demo's dbt project, with its profiles.yml (default integration_tests)",
    )
