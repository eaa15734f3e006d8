"""Copies of the repository's dbt project, for runs that must not touch its own target or tables
(the tests, the benchmark)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

DBT_PARTS = ("dbt_project.yml", "models", "macros", "seeds", "snapshots", "analyses", "tests")


def copy_project(source: Path, destination: Path, parts: Iterable[str] = DBT_PARTS, extra: Iterable[str] = ()) -> Path:
    """A copy of the dbt project at `source` (not its Python package or local state)."""
    destination.mkdir(parents=True, exist_ok=True)
    for part in (*parts, *extra):
        path = Path(source) / part
        if path.is_dir():
            shutil.copytree(path, destination / part, dirs_exist_ok=True)
        elif path.is_file():
            shutil.copy2(path, destination / part)
    return destination
