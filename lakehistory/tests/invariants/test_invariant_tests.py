"""lakehistory's invariant tests, as another project uses them: installed as a package and applied
to small fixtures (invariants/project). Each test must pass its *_good fixture and catch exactly
the broken rows of its *_bad fixture, worked out by hand below, with a `problem` that names them."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from harness import REPO_ROOT, DbtProject, unique_schema

FIXTURES = Path(__file__).parent / "project"
MARCH_5 = dt.datetime(2024, 3, 5)

# Per test on a bad fixture: the failing rows it must return, by the columns that identify them.
CAUGHT: dict[str, tuple[tuple[str, ...], set]] = {
    "one_active__fivetran_bad": (("id",), {(1,)}),
    "active_iff_open_end__fivetran_bad": (("id",), {(2,), (3,)}),
    "start_not_after_end__fivetran_bad": (("id",), {(5,)}),
    "contiguous__fivetran_bad": (("id",), {(1,), (4,)}),
    "contiguous__fivetran_bad__no_deleted_column": (("id",), {(1,)}),  # key 4's gap reads as a delete
    "one_active__versions_bad": (("id",), {(1,), (3,)}),  # key 2's empty row shares no version
    "contiguous__versions_bad": (("id",), {(1,), (2,), (3,)}),
    "contiguous__versions_bad__zero_length_allowed": (("id",), {(1,), (3,)}),
    "gap_free_ids__ids_bad": (("id",), {(0,), (3,), (4,)}),
    "gap_free_ids__ids_per_table_bad": (("id",), {(1,), (3,)}),
    "hx_append_only__hx_bad": (("id", "txn_id"), {(None, 2), (5, 3)}),
    "version_chain__states_bad": (
        ("region", "id", "version"),
        {("a", 1, 3), ("a", 2, 2), ("b", 1, 1), ("b", 2, 1), ("b", 2, 2), ("c", 1, 3)},
    ),
    "update_pairs__events_bad": (("id", "_hist_trans_id"), {(1, 6), (2, 6)}),
    "history_foreign_key__station_hx_bad": (
        ("network_id", "network_hx_id", "mod_time"),
        {
            (1, 10, MARCH_5),  # stale
            (2, 10, MARCH_5),  # another network's version
            (1, 99, MARCH_5),  # no such row
            (1, None, MARCH_5),  # NULL with a parent
            (None, 20, MARCH_5),  # set without a network
            (1, 11, dt.datetime(2024, 2, 1)),  # a later version although 10 was current
        },
    ),
    "history_foreign_key__station_hx_good__no_fallback": (
        ("network_id", "network_hx_id", "mod_time"),
        {(1, 10, dt.datetime(2024, 1, 1))},  # older than the network: fails only without the fallback
    ),
}

PASSED = {
    "one_active__fivetran_good",
    "active_iff_open_end__fivetran_good",
    "start_not_after_end__fivetran_good",
    "contiguous__fivetran_good",
    "contiguous__fivetran_good__no_deleted_column",
    "one_active__versions_good",
    "contiguous__versions_good",
    "start_not_after_end__versions_good",
    "gap_free_ids__ids_good",
    "gap_free_ids__ids_per_table_good",
    "hx_append_only__hx_good",
    "version_chain__states_good",
    "update_pairs__events_good",
    "history_foreign_key__station_hx_good",
}


@pytest.fixture(scope="module")
def fixture_build(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    project_dir = tmp_path_factory.mktemp("invariants") / "project"
    shutil.copytree(FIXTURES, project_dir)
    (project_dir / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    project = DbtProject(project_dir, unique_schema("invariants"))
    project.run_ok("deps")
    logged: list[str] = []

    def keep_log(event) -> None:
        if event.info.name == "JinjaLogInfo":
            logged.append(event.info.msg)

    result = project.invoke("build", callbacks=[keep_log])
    assert result.exception is None, result.exception
    statuses = {
        r.node.name: (str(r.status), r.failures if str(r.status) != "error" else r.message)
        for r in result.result.results
        if r.node.resource_type == "test"
    }
    return {"project": project, "statuses": statuses, "logged": "\n".join(logged)}


def test_every_fixture_test_ran(fixture_build: dict) -> None:
    assert set(fixture_build["statuses"]) == PASSED | set(CAUGHT)


@pytest.mark.parametrize("name", sorted(PASSED))
def test_a_sound_fixture_passes(fixture_build: dict, name: str) -> None:
    status, failures = fixture_build["statuses"][name]
    assert status == "pass", f"{name}: {status} with {failures} failing rows"


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_a_broken_fixture_fails_with_exactly_its_broken_rows(fixture_build: dict, name: str) -> None:
    project: DbtProject = fixture_build["project"]
    columns, expected = CAUGHT[name]
    status, failures = fixture_build["statuses"][name]
    assert status == "fail", f"{name}: {status}"
    rows = project.rows(f"select * from `{project.schema}_dbt_test__audit`.`{name}`")
    assert failures == len(rows)
    found = {tuple(row[c] for c in columns) for row in rows}
    assert found == expected
    for row in rows:
        problem = row["problem"]
        assert problem, f"{name}: a failing row without a problem: {row}"
        # The problem names the row: its identifying values are in the text.
        assert all(str(row[c]) in problem for c in columns if isinstance(row[c], int | str)), problem
        # ...and the failing rows are shown in the run's log, so a user sees them without a query.
        assert problem in fixture_build["logged"], f"{name}: not logged: {problem}"
