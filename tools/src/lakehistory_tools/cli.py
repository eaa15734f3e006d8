"""The `lakehistory-demo` command: the demo source for `integration_tests/`.

    lakehistory-demo generate --landing PATH --scale N --syncs S --seed K [--sync K] [options]
    lakehistory-demo landed --landing PATH --syncs S [--tables ...] [--extract-tables ...]
    lakehistory-demo domain                      # the demo tables as JSON
    lakehistory-demo run --landing PATH --scale N --syncs S --seed K [--project-dir DIR]   # make demo

Also runnable as `python -m lakehistory_tools.cli`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence

from lakehistory_tools import demo
from lakehistory_tools.generator.domain import TABLE_NAMES


def _table_list(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TABLE_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown tables {', '.join(unknown)}; choose from {', '.join(TABLE_NAMES)}")
    return names


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected YYYY-MM-DD") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakehistory-demo", description="The CRMP demo source: simulate it and land its change batches."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser(
        "generate",
        help="simulate the CRMP climate-station source and land its change batches",
        description="Simulate the CRMP demo source (meta_network, meta_station, meta_history, meta_vars, obs_raw) "
        "and land, per sync and table, one Fivetran history-mode batch (or a daily full extract).",
    )
    _add_source_options(g)
    g.add_argument(
        "--sync",
        type=int,
        default=None,
        metavar="K",
        help="land only sync K (1..S), as a daily job would: syncs 1..K are simulated, only K is written; "
        "landing 1, 2, ... one at a time gives the same files as one full run (default: all syncs)",
    )
    g.set_defaults(func=_generate)

    r = sub.add_parser(
        "run",
        help="the demo: land each sync not landed yet and `dbt build` after each, then preview and report",
        description="The demo in one process (one Spark session): land each sync not yet landed, one a day, "
        "with `dbt build` after each; then the time-travel previews (`dbt show`) and `lakehistory status`.",
    )
    _add_source_options(r)
    demo.add_arguments(r)
    r.set_defaults(func=lambda args: demo.run(args, _generate))

    lnd = sub.add_parser(
        "landed",
        help="print how many syncs a landing root holds",
        description="Print the highest K such that syncs 1..K are landed for every table (batch manifest "
        "or daily extract present), at most S; 0 when sync 1 is not.",
    )
    lnd.add_argument("--landing", required=True, metavar="PATH", help="landing root to look into")
    lnd.add_argument("--syncs", type=_positive, required=True, metavar="S", help="number of syncs planned")
    _add_table_options(lnd, "look for")
    lnd.set_defaults(func=_landed)

    d = sub.add_parser("domain", help="print the demo tables (columns, types, keys, foreign keys) as JSON")
    d.set_defaults(func=_domain)
    return parser


def _add_source_options(g: argparse.ArgumentParser) -> None:
    """What `generate` and `run` simulate and how they land it."""
    g.add_argument("--landing", required=True, metavar="PATH", help="landing root to write into")
    g.add_argument(
        "--scale",
        type=_positive,
        default=100,
        metavar="N",
        help="number of stations at the initial load; the other tables scale from it (default 100)",
    )
    g.add_argument("--syncs", type=_positive, default=5, metavar="S", help="number of daily syncs (default 5)")
    g.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")
    g.add_argument(
        "--format",
        dest="file_format",
        choices=("csv", "parquet"),
        default="csv",
        help="batch file format (default csv)",
    )
    g.add_argument(
        "--compression", choices=("none", "gzip", "zstd"), default="none", help="batch file compression (default none)"
    )
    g.add_argument(
        "--earliest-form",
        choices=("file", "column"),
        default="file",
        help="earliest starts as earliest files (published form) or a _fivetran_earliest column "
        "(2024 draft); default file",
    )
    _add_table_options(g, "write")
    g.add_argument(
        "--horizon",
        type=_positive,
        default=7,
        metavar="SYNCS",
        help="syncs during which an observation stays open to QA changes (default 7)",
    )
    g.add_argument("--no-shuffle", action="store_true", help="keep the column order of batch files fixed")
    g.add_argument("--no-progress", action="store_true", help="no progress display")


def _add_table_options(p: argparse.ArgumentParser, what: str) -> None:
    """--tables, --extract-tables and --start-date: shared by `generate` and `landed`."""
    p.add_argument(
        "--tables",
        type=_table_list,
        default=list(TABLE_NAMES),
        metavar="T1,T2",
        help=f"tables to {what} (default: all five)",
    )
    p.add_argument(
        "--extract-tables",
        type=_table_list,
        default=[],
        metavar="T1,T2",
        help="tables written as daily full extracts (<landing>/extracts/<table>/<day>.csv) "
        "instead of history-mode batches (default: none)",
    )
    p.add_argument(
        "--start-date",
        type=_date,
        default=dt.date(2024, 1, 1),
        metavar="YYYY-MM-DD",
        help="day of the first sync (default 2024-01-01)",
    )


def _run_with_progress(run, console, args: argparse.Namespace, tables: list[str]):
    """Call `run(on_progress)` under a rich progress display (one bar for syncs, one for tables)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if args.no_progress:
        return run()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        last = args.sync or args.syncs
        syncs = progress.add_task("syncs", total=last)
        steps = progress.add_task("tables", total=(1 if args.sync else args.syncs) * len(tables))

        def on_progress(sync: int, table: str | None) -> None:
            if table is None:
                progress.update(syncs, description=f"sync {sync}/{args.syncs} simulated")
                if sync < last and args.sync:  # simulated only, nothing to write
                    progress.advance(syncs)
                else:
                    progress.update(steps, description=f"sync {sync}: writing")
                return
            progress.advance(steps)
            progress.update(steps, description=f"sync {sync}: {table}")
            if table == tables[-1]:
                progress.advance(syncs)

        return run(on_progress)


def _generate(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from lakehistory_tools.generator import GeneratorConfig, generate
    from lakehistory_tools.generator.land import CHANGE_HEADER, SUMMARY_HEADER, change_rows, summary_rows

    missing = [t for t in args.extract_tables if t not in args.tables]
    if missing:
        print(f"lakehistory-demo generate: --extract-tables {','.join(missing)} not in --tables", file=sys.stderr)
        return 2
    if args.sync is not None and not 1 <= args.sync <= args.syncs:
        print(f"lakehistory-demo generate: --sync must be between 1 and --syncs ({args.syncs})", file=sys.stderr)
        return 2
    console = Console() if sys.stdout.isatty() else Console(width=120)
    config = GeneratorConfig(
        scale=args.scale, syncs=args.syncs, seed=args.seed, start=args.start_date, horizon=args.horizon
    )
    tables = [t for t in TABLE_NAMES if t in args.tables]

    def run(on_progress=None):
        return generate(
            args.landing,
            config,
            tables=tables,
            extract_tables=args.extract_tables,
            file_format=args.file_format,
            compression=args.compression,
            earliest_form=args.earliest_form,
            shuffle_columns=not args.no_shuffle,
            on_progress=on_progress,
            only_sync=args.sync,
        )

    try:
        summary = _run_with_progress(run, console, args, tables)
    except FileExistsError as e:
        hint = f"sync {args.sync} is already landed" if args.sync else "use an empty landing root"
        print(f"lakehistory-demo generate: {e}; {hint}", file=sys.stderr)
        return 1
    which = f"sync {args.sync} of {args.syncs}" if args.sync else f"{args.syncs} syncs"
    landed = Table(title=f"rows landed in {summary.landing_root} (scale {args.scale}, {which}, seed {args.seed})")
    for i, h in enumerate(SUMMARY_HEADER):
        landed.add_column(h, justify="left" if i < 2 else "right", no_wrap=i == 0)
    for row in summary_rows(summary):
        landed.add_row(*row)
    console.print(landed)
    changes = Table(title="changes simulated at the source")
    for i, h in enumerate(CHANGE_HEADER):
        changes.add_column(h, justify="left" if i < 1 else "right", no_wrap=i == 0)
    for row in change_rows(summary):
        changes.add_row(*row)
    console.print(changes)
    console.print(
        f"{summary.seconds:.1f} s ({summary.simulate_seconds:.1f} s simulating, the rest building and writing files)"
    )
    return 0


def _landed(args: argparse.Namespace) -> int:
    from lakehistory_tools.generator.land import landed_syncs

    missing = [t for t in args.extract_tables if t not in args.tables]
    if missing:
        print(f"lakehistory-demo landed: --extract-tables {','.join(missing)} not in --tables", file=sys.stderr)
        return 2
    print(landed_syncs(args.landing, args.tables, args.extract_tables, start=args.start_date, syncs=args.syncs))
    return 0


def _domain(args: argparse.Namespace) -> int:
    from lakehistory_tools.generator.domain import domain_json

    print(domain_json())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
