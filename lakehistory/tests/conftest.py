"""Shared fixtures: one throwaway lakehouse (warehouse + Derby metastore) per test process, and
the demo built in it once for every test that reads it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import build_tables
import pytest

from harness import (
    DEMO_CONFIG,
    DEMO_EXTRACTS,
    JVM_FOR_SHORT_QUERIES,
    REPO_ROOT,
    DbtProject,
    copy_project,
    unique_schema,
)
from lakehistory.history import lock
from lakehistory_tools.generator import generate


def pytest_configure(config: pytest.Config) -> None:
    # The jars and Spark's log settings come from the project's local state (setup/bootstrap.sh).
    os.environ.setdefault("LAKEHISTORY_HOME", str(REPO_ROOT / ".local"))
    os.environ.pop("SPARK_REMOTE", None)  # the embedded session unless a test asks for Connect
    # Thousands of queries over a handful of rows each: the engine sized for that (profiles.yml).
    os.environ.setdefault("LAKEHISTORY_TINY_DATA", "true")
    os.environ.setdefault("LAKEHISTORY_JAVA_OPTIONS", JVM_FOR_SHORT_QUERIES)
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


@pytest.fixture(scope="session")
def demo(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    """The repository's dbt project on the generated demo, landed and built one day at a time as
    `make demo` does: every model, seed and snapshot on every day, and every data test (the
    invariant tests included) on the last, over the history of all four. Built once per test
    process; tests only read it."""
    project = DbtProject(copy_project(tmp_path_factory.mktemp("demo")), unique_schema("demo"))
    made_of = build_tables.fingerprint(DEMO_CONFIG, DEMO_EXTRACTS)  # the sources as the build reads them
    for sync in range(1, DEMO_CONFIG.syncs + 1):
        generate(project.landing, DEMO_CONFIG, extract_tables=DEMO_EXTRACTS, only_sync=sync)
        project.run_ok("build", *(() if sync == DEMO_CONFIG.syncs else ("--exclude-resource-type", "test")))
    # Saved for the cluster test (`make test-cluster`, after this process): the build it compares
    # its own with, the writer lock as a build leaves it at exit.
    lock.let_go_all()
    build_tables.save(build_tables.saved_demo(), made_of, build_tables.tables_of(project.spark, project.schema))
    return project


# Every group of 5 s or more, in seconds in one process (`make test-python` with
# `-p lakehistory_tools.suite_costs`, then `python -m lakehistory_tools.suite_costs --group-seconds`):
# queued longest first, so that neither test process waits for the other at the end
# (docs/decisions/0003). A group not listed here queues after these.
GROUP_SECONDS = {
    "lakehistory/tests/history/test_branch_ownership.py": 725,
    "lakehistory/tests/history/test_branches.py": 485,
    "lakehistory/tests/history/test_day_two.py": 365,
    "lakehistory/tests/hx/test_main_tables.py": 355,
    "demo": 345,
    "lakehistory/tests/history/test_syncs.py": 275,
    "lakehistory/tests/hx/test_hx_tables.py": 200,
    "lakehistory/tests/changes/test_events_and_states.py": 195,
    "lakehistory/tests/history/test_writer_lock.py": 195,
    "lakehistory/tests/time_travel/test_time_travel.py": 165,
    "lakehistory/tests/history/test_fivetran_history.py": 160,
    "lakehistory/tests/history/test_one_batch.py": 140,
    "lakehistory/tests/history/test_stops.py": 130,
    "lakehistory/tests/history/test_catch_up.py": 130,
    "lakehistory/tests/time_travel/test_retention.py": 120,
    "lakehistory/tests/history/test_bad_input.py": 115,
    "lakehistory/tests/history/test_revert.py": 105,
    "lakehistory/tests/history/test_schedules.py": 105,
    "lakehistory/tests/history/test_operation_sequences.py": 80,
    "lakehistory/tests/history/test_sync_reverts.py": 75,
    "lakehistory/tests/history/test_fivetran_columns.py": 65,
    "lakehistory/tests/history/test_schema_evolution.py": 50,
    "lakehistory/tests/time_travel/test_tags.py": 50,
    "lakehistory/tests/time_travel/test_any_history.py": 35,
    "lakehistory/tests/invariants/test_invariant_tests.py": 20,
    "lakehistory/tests/adapter/test_sparksession_adapter.py": 20,
    "lakehistory/tests/history/test_as_a_package.py": 20,
    "lakehistory/tests/runtime/test_dbt_build.py": 15,
    "lakehistory/tests/history/test_threads.py": 10,
    "lakehistory/tests/oracle/test_reference_model.py": 10,
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test-python` runs the tests in two processes (pytest-xdist, `--dist loadgroup`). Each
    test file goes to one process, which builds its module fixtures once; every test that reads
    the demo goes to one process, which builds the demo once. The groups are queued longest
    first (GROUP_SECONDS, then by number of tests; the Makefile keeps pytest-xdist from
    reordering them), each group's tests in the order they were collected."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = "demo" if "demo" in getattr(item, "fixturenames", ()) else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
        groups.setdefault(group, []).append(item)
    queue = sorted(groups, key=lambda g: (-GROUP_SECONDS.get(g, 0), -len(groups[g])))  # stable: ties as collected
    items[:] = [item for group in queue for item in groups[group]]


def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    # pytest-xdist passes a test's group to its scheduler in the test's node id. Under a pytest it
    # does not support, the ids stay as they were and every group is lost without a word (the demo
    # then built in each process): stop instead. setup/requirements.lock says which pytest.
    ungrouped = [i for i in ids if "@" not in i]
    if node.config.getoption("dist") == "loadgroup" and ungrouped:
        pytest.exit(
            f"pytest-xdist did not group {len(ungrouped)} tests (e.g. {ungrouped[0]}) under this pytest:"
            " install the pytest that setup/requirements.lock pins",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
