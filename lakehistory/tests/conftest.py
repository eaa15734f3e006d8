"""Shared fixtures: one throwaway lakehouse (warehouse + Derby metastore) per test process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness import REPO_ROOT, DbtProject, copy_project, unique_schema


def pytest_configure(config: pytest.Config) -> None:
    # The jars and Spark's log settings come from the project's local state (setup/bootstrap.sh).
    os.environ.setdefault("LAKEHISTORY_HOME", str(REPO_ROOT / ".local"))
    os.environ.pop("SPARK_REMOTE", None)  # the embedded session unless a test asks for Connect
    # PySpark hands timestamps to Python in the process's time zone; the lakehouse speaks UTC.
    os.environ["TZ"] = "UTC"
    time.tzset()


@pytest.fixture(scope="session")
def lakehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse and metastore every dbt invocation of this process uses. Spark fixes them
    when the session starts, so they are set once, before the first invocation."""
    path = tmp_path_factory.mktemp("lakehouse")
    os.environ["LAKEHISTORY_LAKEHOUSE"] = str(path)
    return path


@pytest.fixture
def dbt_project(lakehouse: Path, tmp_path: Path, request: pytest.FixtureRequest) -> DbtProject:
    """A fresh copy of the repository's dbt project with a schema of its own."""
    return DbtProject(copy_project(tmp_path / "project"), unique_schema(request.node.name))
