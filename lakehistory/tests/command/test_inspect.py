"""The `lakehistory` command on the demo: each subcommand's dbt operation, run in this process,
and its printed table checked against the reference model and the transactions table."""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter

import pytest
from demo_reference import HISTORY, known_after, naive

from harness import DEMO_CONFIG, DbtProject
from lakehistory.command.cli import dbt_arguments
from lakehistory.command.render import cell
from lakehistory.names import ACTIVE, END, START, SYNCED
from lakehistory_tools.generator import get_table

SNAPSHOTS = ("meta_history_snapshot", "meta_vars_snapshot")


def lakehistory(demo: DbtProject, capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    """The lines of the table `lakehistory ARGV` prints: header, rule, rows."""
    capsys.readouterr()
    demo.run_ok(*dbt_arguments(argv))
    lines = capsys.readouterr().out.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", " "})
    return lines[rule - 1 :]


def rows_of(printed: list[str]) -> list[str]:
    """The printed table's rows: from below its header to the first blank line."""
    rows = list(itertools.takewhile(str.strip, printed[2:]))
    return [line for line in rows if not line.startswith("(")]


def day_one_version(demo: DbtProject) -> int:
    return demo.rows("select max(txn_id) as v from {schema}.lakehistory_transactions where batch_sequence = 1")[0]["v"]


def test_status_lists_every_table_with_its_batches_applied_and_a_new_one_pending(
    demo: DbtProject, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = lakehistory(demo, capsys, "status")
    assert printed[0].split()[:5] == ["table", "kind", "source", "applied", "pending"]
    status = {line.split()[0]: line.split() for line in rows_of(printed)}
    assert set(status) == {f"{t}_history" for t in HISTORY} | set(SNAPSHOTS)
    for fields in status.values():
        assert fields[3:5] == [str(DEMO_CONFIG.syncs), "0"], fields  # every sync applied, none pending
    last = demo.rows("select max(txn_id) as v from {schema}.lakehistory_transactions")[0]["v"]
    assert f"(version_at): transaction {last}; every sync is complete" in "\n".join(printed)

    # A batch landed and not yet applied is pending (a copy of the last one, as the next batch).
    landed = demo.landing / "meta_network"
    last = max(p for p in landed.iterdir() if p.is_dir())
    following = landed / f"{int(last.name) + 1:06d}"
    shutil.copytree(last, following)
    manifest = json.loads((following / "manifest.json").read_text())
    manifest |= {"batch_id": following.name, "sequence": manifest["sequence"] + 1}
    (following / "manifest.json").write_text(json.dumps(manifest))
    try:
        pending = {line.split()[0]: line.split()[4] for line in rows_of(lakehistory(demo, capsys, "status"))}
    finally:
        shutil.rmtree(following)
    assert pending == {**{name: "0" for name in status}, "meta_network_history": "1"}


def test_log_filters_by_table_and_operation(demo: DbtProject, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = demo.rows("select txn_id, history_table from {schema}.lakehistory_transactions")
    station = [r["txn_id"] for r in recorded if r["history_table"].replace("`", "").endswith(".meta_station_history")]
    printed = rows_of(lakehistory(demo, capsys, "log", "--table", "meta_station_history"))
    assert [int(line.split()[0]) for line in printed] == sorted(station, reverse=True) != []
    snapshots = rows_of(lakehistory(demo, capsys, "log", "--operation", "snapshot", "--limit", "3"))
    assert len(snapshots) == 3 and {line.split()[1] for line in snapshots} == {"snapshot"}


def test_timeline_shows_every_version_of_one_key(demo: DbtProject, capsys: pytest.CaptureFixture[str]) -> None:
    reference = known_after()["history"]
    # The key with the most versions in the reference, of any history table.
    count, table, key = max(
        (n, t, k) for t in HISTORY for k, n in Counter(r[get_table(t).key[0]] for r in reference[t]).items()
    )
    column = get_table(table).key[0]
    printed = lakehistory(demo, capsys, "timeline", f"{table}_history", str(key))
    stored = demo.rows(f"select count(*) as n from {{schema}}.{table}_history where {column} = {int(key)}")
    assert len(rows_of(printed)) == stored[0]["n"] >= count >= 2
    starts = {cell(naive(r[START])) for r in reference[table] if r[column] == key}
    assert all(any(start in line for line in printed) for start in starts), (starts, printed)


def test_as_of_and_diff_show_the_rows_of_a_version_and_what_changed_since(
    demo: DbtProject, capsys: pytest.CaptureFixture[str]
) -> None:
    version = day_one_version(demo)
    then, now = known_after(1)["history"]["meta_network"], known_after()["history"]["meta_network"]
    shown = rows_of(lakehistory(demo, capsys, "as-of", "meta_network_history", str(version), "--limit", "1000"))
    assert len(shown) == len(then)

    last = demo.rows("select max(txn_id) as v from {schema}.lakehistory_transactions")[0]["v"]
    changed = rows_of(
        lakehistory(demo, capsys, "diff", "meta_network_history", str(version), str(last), "--limit", "1000")
    )
    signature = get_table("meta_network")
    columns = [*signature.key, *signature.column_names, START, END, ACTIVE, SYNCED]
    before = Counter(tuple(naive(r[c]) for c in columns) for r in then)
    after = Counter(tuple(naive(r[c]) for c in columns) for r in now)
    marks = Counter(line.split()[0] for line in changed)
    assert marks == Counter({"+": sum((after - before).values()), "-": sum((before - after).values())}), changed
    assert marks["+"] > 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("timeline", "meta_station_history", "1", "2"), "has the key (station_id): give 1 value(s)"),
        (("as-of", "meta_station", "1"), "meta_station is not a history table or extract snapshot of this project"),
        (("diff", "meta_history_snapshot", "1", "2"), "meta_history_snapshot is a snapshot, not a history table"),
        (("as-of", "meta_station_history", "yesterday"), "version 'yesterday' is not a transaction id"),
    ],
)
def test_a_request_the_project_cannot_answer_names_what_is_wrong(demo: DbtProject, argv: tuple, expected: str) -> None:
    errors: list[str] = []  # what dbt prints for a failed operation (its result carries no message)

    def collect(event) -> None:
        if event.info.name in ("RunningOperationCaughtError", "RunningOperationUncaughtError"):
            errors.append(event.data.exc)

    assert not demo.invoke(*dbt_arguments(argv), callbacks=[collect]).success
    assert any(expected in error for error in errors), errors


def test_the_command_line_becomes_one_dbt_operation() -> None:
    argv = ["timeline", "meta_station_history", "7", "--project-dir", "crmp", "--target", "connect"]
    assert dbt_arguments(argv) == [
        "run-operation",
        "lakehistory.inspect",
        "--args",
        json.dumps({"command": "timeline", "args": {"table_name": "meta_station_history", "key": ["7"]}}),
        "--quiet",
        *("--project-dir", "crmp", "--target", "connect"),
    ]


@pytest.mark.parametrize(
    ("argv", "operation", "arguments"),
    [
        (["branch", "create", "fix", "--from", "paper-2024"], "create_branch", {"name": "fix", "tag": "paper-2024"}),
        (["branch", "create", "fix", "--from", "12"], "create_branch", {"name": "fix", "txn": 12}),
        (["branch", "create", "fix"], "create_branch", {"name": "fix"}),
        (["branch", "publish", "fix"], "publish_branch", {"name": "fix"}),
        (["branch", "drop", "fix"], "drop_branch", {"name": "fix"}),
    ],
)
def test_a_branch_command_is_its_run_operation(argv: list[str], operation: str, arguments: dict) -> None:
    assert dbt_arguments([*argv, "--target", "connect"]) == [
        "run-operation",
        f"lakehistory.{operation}",
        "--args",
        json.dumps(arguments),
        "--target",
        "connect",
    ]


def test_a_branch_s_from_is_for_create_only() -> None:
    with pytest.raises(SystemExit):
        dbt_arguments(["branch", "publish", "fix", "--from", "3"])
