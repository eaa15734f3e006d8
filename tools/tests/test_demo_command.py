"""`lakehistory-demo run` (what `make demo` runs), checked without Spark or dbt: its options are
those of `generate`, and each preview it shows is an analysis of the demo project."""

from __future__ import annotations

import shlex
import shutil
import subprocess

from harness import REPO_ROOT
from lakehistory_tools import demo
from lakehistory_tools.cli import build_parser


def test_run_takes_the_makefile_s_options() -> None:
    make = shutil.which("make")
    assert make, "make is not installed"
    dry_run = [make, "--dry-run", "demo"]  # prints the recipe, runs nothing
    made = subprocess.run(dry_run, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout  # noqa: S603
    line = next(part for part in made.splitlines() if "lakehistory-demo run" in part)
    argv = shlex.split(line.split("lakehistory-demo", 1)[1])
    args = build_parser().parse_args(argv)
    assert (args.scale, args.syncs, args.seed, args.extract_tables) == (50, 4, 42, ["meta_history", "meta_vars"])
    assert args.project_dir.name == "integration_tests" and args.func is not None
    assert not hasattr(args, "sync")  # a run lands every sync not landed yet, one day at a time


def test_every_preview_is_an_analysis_of_the_demo_project() -> None:
    analyses = {p.stem for p in (REPO_ROOT / "integration_tests" / "analyses").glob("*.sql")}
    assert {model for model, _ in demo.PREVIEWS} <= analyses
