"""Copies of the demo dbt project (`integration_tests/`), for runs that must not touch its own
target or tables (the tests, the benchmark)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

DEMO_PARTS = ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "snapshots", "analyses", "tests")


def copy_demo_project(repository: Path, destination: Path, parts: Iterable[str] = DEMO_PARTS) -> Path:
    """A copy of the repository's demo project at `destination`, installing the package from the
    repository itself (`packages.yml` names it by its absolute path). Run `dbt deps` in it next."""
    source = Path(repository) / "integration_tests"
    destination.mkdir(parents=True, exist_ok=True)
    for part in parts:
        path = source / part
        if path.is_dir():
            shutil.copytree(path, destination / part, dirs_exist_ok=True)
        elif path.is_file():
            shutil.copy2(path, destination / part)
    (destination / "packages.yml").write_text(f"packages:\n  - local: {Path(repository).resolve()}\n")
    return destination
