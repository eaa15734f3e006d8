"""Tags (lakehistory.tag, seed 002's tagging): a name for a transaction, read back wherever a
version goes, refused where it could not give the state back exactly, and kept by cleanup, which
says which tags kept what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_case import HistoryCase, T, batch, normalize, version

from harness import DbtProject, copy_project, unique_schema
from lakehistory.command.cli import dbt_arguments
from lakehistory.landing.batch import Column

GAUGE = [Column("gauge_id", "bigint"), Column("label", "string")]


@pytest.fixture(scope="module")
def case(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> HistoryCase:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("tags")), unique_schema("tags"))
    project.landing.mkdir()
    return HistoryCase(project, "gauge", GAUGE, ["gauge_id"])


def operation(case: HistoryCase, macro: str, **args) -> list[str]:
    """Run a run-operation; return what it logged."""
    said: list[str] = []
    result = case.project.invoke(
        "run-operation",
        f"lakehistory.{macro}",
        "--args",
        json.dumps(args),
        callbacks=[lambda e: said.append(e.info.msg)],
    )
    assert result.success, said
    return said


def refused(case: HistoryCase, macro: str, **args) -> str:
    return case.project.run_fails("run-operation", f"lakehistory.{macro}", "--args", json.dumps(args))


def as_of(case: HistoryCase, version_sql: str) -> list[tuple]:
    """The source table's rows (its active Fivetran versions) as of a version."""
    query = case.project.compile_inline(
        f"select gauge_id, label from {{{{ lakehistory.as_of(ref('gauge'), {version_sql}) }}}} where _fivetran_active"
    )
    return sorted((r["gauge_id"], r["label"]) for r in map(normalize, case.project.rows(query)))


def test_a_tag_names_a_transaction_and_cleanup_keeps_what_it_needs(
    case: HistoryCase, capsys: pytest.CaptureFixture[str]
) -> None:
    g = version
    for n, label in ((1, "a"), (2, "b"), (3, "c")):
        case.land(batch("gauge", GAUGE, "gauge_id", n, "alice", [g(T(n), gauge_id=1, label=label)]))
    case.run()
    assert as_of(case, "1") == [(1, "a")]

    assert any(
        "tag paper: transaction 1" in line for line in operation(case, "tag", name="paper", txn=1, note="as sent")
    )
    assert any("tag latest: transaction 3" in line for line in operation(case, "tag", name="latest"))
    assert as_of(case, "lakehistory.tagged('paper')") == as_of(case, "1") == [(1, "a")]
    assert as_of(case, "lakehistory.tagged('latest')") == [(1, "c")]
    version_at = case.project.compile_inline("select {{ lakehistory.version_at(tag='paper') }} as v")
    assert case.project.rows(version_at)[0]["v"] == 1
    assert any("(already)" in line for line in operation(case, "tag", name="paper", txn=1))

    for args, said in (
        ({"name": "paper", "txn": 2}, "tag paper names transaction 1 already: drop it first"),
        ({"name": "not a name!"}, "a tag's name is 1 to 128 letters"),
        ({"name": "far", "txn": 99}, "tag far: there is no transaction 99 (the last one is 3)"),
    ):
        error = refused(case, "tag", **args)
        assert said in error, error
    query = case.project.compile_inline(
        "select * from {{ lakehistory.as_of(ref('gauge'), lakehistory.tagged('nope')) }}"
    )
    with pytest.raises(Exception, match="there is no tag nope"):
        case.project.rows(query)

    # Cleanup up to transaction 3 would remove the versions current as of 1 and 2: the tag keeps 1's.
    said = operation(case, "cleanup", model="gauge", before_version=3)
    assert any("tag paper (transaction 1) keeps 1 version(s) of gauge" in line for line in said), said
    assert as_of(case, "lakehistory.tagged('paper')") == [(1, "a")]
    assert as_of(case, "2") == [], "version 2's row was removed: no tag needed it"
    error = refused(case, "tag", name="late", txn=2)
    assert "cleanup transaction(s) 4 (" in error and "came after transaction 2" in error, error

    capsys.readouterr()
    case.project.run_ok(*dbt_arguments(["tags"]))
    listed = capsys.readouterr().out.splitlines()
    assert any("paper" in line and "as sent" in line for line in listed), listed
    assert any("latest" in line for line in listed), listed

    # Dropped, the tag keeps nothing: the next cleanup removes what only it kept.
    assert any("tag paper: dropped" in line for line in operation(case, "drop_tag", name="paper"))
    operation(case, "cleanup", model="gauge", before_version=3)
    assert as_of(case, "1") == []
    assert any("no such tag" in line for line in operation(case, "drop_tag", name="paper"))
