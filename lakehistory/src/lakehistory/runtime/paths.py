"""Project-local, git-ignored state: virtualenv, jars, warehouse, metastore, demo landing."""

from __future__ import annotations

import os
from pathlib import Path


def local_home() -> Path:
    """`$LAKEHISTORY_HOME`, or `.local` in the current directory (the project root for make)."""
    return Path(os.environ.get("LAKEHISTORY_HOME") or ".local").resolve()


def jar_dir() -> Path:
    return local_home() / "jars"
