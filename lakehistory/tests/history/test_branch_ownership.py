"""Branches on the engine alone (no dbt build per step): a branch owns exactly its schema, is
known by its identity rather than its name, and nothing a stopped publish reserved holds main for
good. Each test is a sequence a user ran and that broke before: a user's schema dropped by
`branch create` or `branch drop`, a second branch of a published branch's name published as
"done" without a row, and a publish stopped after it reserved main's transaction, then its branch
dropped, leaving main's tables refusing every run."""

from __future__ import annotations

from pathlib import Path

import pytest
from branch_case import (
    TABLES,
    branch_of,
    branch_with_a_change,
    create,
    current,
    drop,
    land,
    last_id,
    main_with_two_tables,
    on_branch,
    publish,
    tables_of,
)
from engine_case import Engine, stopping
from sync_case import COLUMNS, new_process

from lakehistory.errors import HistoryError
from lakehistory.history import turn
from lakehistory.operations import abandon, branches


@pytest.fixture(scope="module")
def folder(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the project (one `dbt deps`) for every lakehouse of the module."""
    return Engine.start(tmp_path_factory.mktemp("branch_ownership"), "branch_ownership").project.project_dir


def test_branch_commands_never_touch_a_schema_they_did_not_create(folder: Path) -> None:
    main = main_with_two_tables(folder, "own_schema")
    spark = main.project.spark
    mine = f"{main.project.schema}__mine"
    spark.sql(f"create schema `{mine}`")
    spark.sql(f"create table `{mine}`.`precious` using delta as select 42 as answer")

    with pytest.raises(HistoryError, match=r"exists and is not a branch lakehistory created.*Nothing was changed"):
        create(main, "mine")
    with pytest.raises(HistoryError, match="exists and is not a branch lakehistory created"):
        drop(main, "mine")
    assert spark.table(f"`{mine}`.`precious`").collect()[0].answer == 42

    other = main_with_two_tables(folder, "own_other")  # another lakehouse's branch of the same schema name
    create(other, "theirs")
    theirs = f"{other.project.schema}__theirs"
    spark.sql(
        f"create schema `{main.project.schema}__theirs` comment '{spark.catalog.getDatabase(theirs).description}'"
    )
    with pytest.raises(HistoryError, match="is another lakehouse's branch"):
        drop(main, "theirs")
    assert drop(other, "theirs") and not spark.catalog.databaseExists(theirs)


def test_a_creation_cut_short_is_made_anew(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = main_with_two_tables(folder, "cut_short")

    def stopped(*_: object) -> None:
        raise RuntimeError("stopped while cloning")

    with monkeypatch.context() as patched:
        patched.setattr(branches, "_clone_cut", stopped)
        with pytest.raises(RuntimeError):
            create(main, "again")
    new_process(monkeypatch)
    assert create(main, "again")["tables"] == ["a", "b"]
    assert current(on_branch(main, "again"), "a") == {1: "a1"}


def test_a_second_branch_of_a_published_branchs_name_is_published_too(folder: Path) -> None:
    main, _ = branch_with_a_change(folder, "name_again", "again")
    assert publish(main, "again")["tables"] == {"a": {"versions_closed": 1, "versions_opened": 2}}

    create(main, "again", fork=2)  # forked before that publish; it changes b only
    second = on_branch(main, "again")
    land(main, "b", 2, {1: "b2"})
    second.apply("b", COLUMNS, ["id"])
    published = publish(main, "again")
    assert published == {
        "transaction": 4,
        "tables": {"b": {"versions_closed": 1, "versions_opened": 2}},  # the new version and the ended copy
        "already_done": False,
    }
    assert current(main, "b") == {1: "b2"} and current(main, "a") == {1: "a2"}


@pytest.mark.parametrize("point", ["reserved", "committed"])
def test_a_publish_stopped_whose_branch_is_gone_is_given_up_and_main_moves_on(
    folder: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    main, _ = branch_with_a_change(folder, f"gone_{point}", "late")

    with monkeypatch.context() as patched:
        patched.setattr(turn, "reached", stopping("publish_branch", _stop_at(point)))
        with pytest.raises(RuntimeError):
            publish(main, "late")
    new_process(monkeypatch)

    give_up = 'lakehistory.abandon_sync --args \'{"sync_id": "lakehistory:publish_branch:3"}\''
    with pytest.raises(HistoryError, match="lakehistory branch publish late") as refused:
        drop(main, "late")
    assert give_up in str(refused.value)
    land(main, "a", 3, {2: "a3"})
    if point == "reserved":  # a has nothing of it: main's table waits for it (a run would record a commit)
        with pytest.raises(Exception, match="publish_branch recorded as transaction 3 was stopped") as wedged:
            main.apply("a", COLUMNS, ["id"])
        assert give_up in str(wedged.value)

    main.project.spark.sql(f"drop schema `{main.project.schema}__late` cascade")  # gone, by hand
    outcome = abandon.abandon_sync(
        main.project.spark, main.writer(history_tables=TABLES), "lakehistory:publish_branch:3"
    )
    if point == "reserved":  # nothing reached a: it is given up
        assert (outcome["waiting"], outcome["already_done"]) == ([f"`{main.project.schema}`.`a`"], False)
        assert current(main, "a") == {1: "a1"}
    else:  # a had committed it: recorded, and so the publish is whole
        assert (outcome["waiting"], outcome["already_done"]) == ([], True)
        assert current(main, "a") == {1: "a2"}

    assert checkpoints(main) == [], "a publish given up leaves nothing beside main's log"
    main.apply("a", COLUMNS, ["id"])  # main takes transactions again: what it has not applied, once
    assert current(main, "a") == {1: "a2", 2: "a3"}
    ids = main.project.rows(f"select distinct txn_id from {main.transactions} order by txn_id")
    assert [r["txn_id"] for r in ids] == list(range(1, 6 if point == "reserved" else 5))
    batches = main.project.rows(f"select batch_id from {main.transactions} where batch_id is not null")
    assert sorted(r["batch_id"] for r in batches) == ["000001", "000001", "000002", "000003"]


def test_a_branch_with_a_branch_of_its_own_is_neither_dropped_nor_published_from_under_it(folder: Path) -> None:
    main, parent = branch_with_a_change(folder, "parent", "p")
    create(parent, "kid")
    kid = f"{parent.project.schema}__kid"
    with pytest.raises(HistoryError, match=f"{kid} were made from it"):
        drop(main, "p")
    with pytest.raises(HistoryError, match=f"{kid} were made from it"):
        publish(main, "p")
    assert drop(parent, "kid")
    assert publish(main, "p")["transaction"] == 3
    assert current(main, "a") == {1: "a2"}


def test_a_commit_one_lakehouse_left_unrecorded_is_recorded_into_its_own_transactions_only(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One process writes main and a branch (a publish, a run on each): what a stopped apply of
    one left unrecorded is the next writer of that lakehouse's to record, never another's."""
    main = main_with_two_tables(folder, "left_main")
    create(main, "side")
    side = on_branch(main, "side")
    land(main, "a", 2, {1: "a2"})

    with monkeypatch.context() as patched:
        patched.setattr(turn, "reached", stopping("apply", _stop_at("committed")))
        with pytest.raises(RuntimeError):
            side.apply("a", COLUMNS, ["id"])
    land(main, "b", 2, {1: "b2"})
    main.apply("b", COLUMNS, ["id"])  # the same process, main's writer
    tables = main.project.rows(f"select distinct history_table from {main.transactions}")
    assert sorted(r["history_table"] for r in tables) == [main.target("a"), main.target("b")]
    side.apply("b", COLUMNS, ["id"])  # the branch's writer records its own commit first
    recorded = side.project.rows(f"select txn_id, history_table, batch_id from {side.transactions} where txn_id > 2")
    assert sorted((r["txn_id"], r["batch_id"]) for r in recorded) == [(3, "000002"), (4, "000002")]


def test_a_branch_of_tables_main_optimized_and_vacuumed_since_their_last_transaction_reads_them(
    folder: Path,
) -> None:
    """The docs recommend OPTIMIZE and VACUUM; a branch made after them clones each table that no
    transaction changed since the fork at its latest version, whose files are all there."""
    main = main_with_two_tables(folder, "vacuumed")
    land(main, "b", 2, {2: "b2"})
    main.apply("b", COLUMNS, ["id"])
    spark = main.project.spark
    spark.sql(f"optimize {main.target('b')}")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"vacuum {main.target('b')} retain 0 hours")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    create(main, "after")
    assert current(on_branch(main, "after"), "b") == {1: "b1", 2: "b2"}


def test_a_branch_run_killed_after_its_commit_is_recorded_before_the_publish_reads_it(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch's history table holds the batch, the branch's log does not: the publish records
    it first, so main takes the rows with their batch, and never applies that batch again."""
    main = main_with_two_tables(folder, "killed_on_branch")
    create(main, "cut")
    land(main, "a", 2, {1: "a2"})

    with monkeypatch.context() as patched:
        patched.setattr(turn, "reached", stopping("apply", _stop_at("committed")))
        with pytest.raises(RuntimeError):
            on_branch(main, "cut").apply("a", COLUMNS, ["id"])
    new_process(monkeypatch)

    assert publish(main, "cut")["tables"] == {"a": {"versions_closed": 1, "versions_opened": 2}}
    assert current(main, "a") == {1: "a2"}
    main.apply("a", COLUMNS, ["id"])  # batch 2 is main's now: nothing to apply
    batches = main.project.rows(f"select txn_id, batch_id from {main.transactions} where history_table like '%`a`'")
    assert sorted((r["txn_id"], r["batch_id"]) for r in batches) == [(1, "000001"), (3, "000002")]


def test_a_vacuum_that_removed_files_a_branch_reads_is_named_before_a_publish_reserves_anything(
    folder: Path,
) -> None:
    """OPTIMIZE and VACUUM of main, as the docs recommend, remove files a branch's clone still
    reads: `branch list` and the publish say so, the publish reserves nothing, main runs on."""
    main = main_with_two_tables(folder, "vacuum_branch")
    land(main, "a", 2, {2: "a2"})
    main.apply("a", COLUMNS, ["id"])  # a second file of a
    create(main, "keep")
    land(main, "a", 3, {1: "a3"})
    on_branch(main, "keep").apply("a", COLUMNS, ["id"])
    writer = main.writer(history_tables=TABLES)
    spark, schema = main.project.spark, f"{main.project.schema}__keep"
    found = [(branch_of(main, "keep"), schema, tables_of(main, "keep"))]
    assert [b["publishable"] for b in branches.listed(spark, writer, found)] == [True]

    spark.sql(f"optimize {main.target('a')}")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"vacuum {main.target('a')} retain 0 hours")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")

    (shown,) = branches.listed(spark, writer, found)
    assert (shown["branch"], shown["fork"], shown["publishable"]) == ("keep", 3, False)
    assert "removed by a VACUUM" in shown["reason"] and "lakehistory branch drop keep" in shown["reason"]
    with pytest.raises(HistoryError, match="branch keep cannot be read: .* Nothing was changed"):
        publish(main, "keep")
    assert not main.project.rows(f"select * from {main.transactions} where txn_id > 3")
    land(main, "b", 4, {1: "b4"})
    main.apply("b", COLUMNS, ["id"])  # nothing reserved: main takes transactions
    assert current(main, "b") == {1: "b4"} and drop(main, "keep")


def checkpoints(main: Engine) -> list[str]:
    found = main.project.spark.sql(f"show tables in `{main.project.schema}` like 'lakehistory_transactions_publish*'")
    return sorted(r.tableName for r in found.collect())


@pytest.mark.parametrize("point", ["reserved", "committed"])
def test_a_publish_stopped_whose_branch_is_gone_completes_from_what_it_read_before_it_reserved(
    folder: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """The publish checkpoints what it writes to main before it reserves main's id: asked again
    after its branch was dropped by hand, it completes from there, and leaves nothing behind."""
    main, _ = branch_with_a_change(folder, f"ckpt_{point}", "gone")
    with monkeypatch.context() as patched:
        patched.setattr(turn, "reached", stopping("publish_branch", _stop_at(point)))
        with pytest.raises(RuntimeError):
            publish(main, "gone")
    new_process(monkeypatch)
    assert len(checkpoints(main)) == 2, "a table's changes and the branch's transaction rows"
    main.project.spark.sql(f"drop schema `{main.project.schema}__gone` cascade")  # by hand

    assert publish(main, "gone")["transaction"] == 3
    assert current(main, "a") == {1: "a2"} and checkpoints(main) == []
    rows = main.project.rows(f"select txn_id, batch_id, sync_id from {main.transactions} where txn_id = 3")
    assert rows == [{"txn_id": 3, "batch_id": "000002", "sync_id": "lakehistory:publish_branch:3"}]
    main.apply("a", COLUMNS, ["id"])  # batch 2 is main's: nothing applied twice
    assert last_id(main) == 3


def _stop_at(point: str):  # noqa: ANN202 - the turn's stop, at one point
    def reached(name: str) -> None:
        if name == point:
            raise RuntimeError(f"stopped at {point}")

    return reached


def test_a_table_the_branch_changed_twice_is_one_row_of_the_publish_that_lists_both(folder: Path) -> None:
    """Several transactions of a branch on one table become one row of main's transaction, with
    its counts summed and each of them kept in its parts; main counts both batches applied and
    reads its next batch after them."""
    main = main_with_two_tables(folder, "twice")
    create(main, "twice")
    branch = on_branch(main, "twice")
    land(main, "a", 2, {1: "a2"})
    branch.apply("a", COLUMNS, ["id"])
    land(main, "a", 3, {1: "a3", 2: "x3"})
    branch.apply("a", COLUMNS, ["id"])

    assert publish(main, "twice")["transaction"] == 3
    rows = main.project.rows(
        f"select history_table, batch_id, batch_sequence, rows_in, commit_message, parts"
        f" from {main.transactions} where txn_id = 3"
    )
    assert len(rows) == 1, rows
    row = rows[0]
    assert (row["batch_id"], row["batch_sequence"], row["rows_in"]) == ("000003", 3, 6)  # rows and earliest starts
    assert row["commit_message"] == "branch twice, its transactions 3, 4"
    assert [(p["txn_id"], p["batch_id"], p["rows_in"]) for p in row["parts"]] == [(3, "000002", 2), (4, "000003", 4)]
    repeated = main.project.rows(
        f"select txn_id, history_table from {main.transactions} group by 1, 2 having count(*) > 1"
    )
    assert repeated == []

    main.apply("a", COLUMNS, ["id"])  # batches 2 and 3 are main's now: nothing applied twice
    assert last_id(main) == 3 and current(main, "a") == {1: "a3", 2: "x3"}
    land(main, "a", 4, {2: "x4"})
    main.apply("a", COLUMNS, ["id"])
    assert last_id(main) == 4 and current(main, "a") == {1: "a3", 2: "x4"}
