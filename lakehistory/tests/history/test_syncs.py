"""A sync is one transaction: the batches a source landed together for several tables share one
id, in sync order whichever table applies first, and the sync becomes visible to a reader of the
consistent cut (`lakehistory.version_at_sql`) only once every table of it has applied it.

The staging and the merge engine are called as the strategy macro calls them, on dbt's Spark
session and real Delta tables (engine_case.py); the cut is the macro's SQL, compiled once."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pytest
from engine_case import Engine, stopping
from sync_case import (
    COLUMNS,
    batch,
    compile_cut,
    ids_by_sync,
    land_alone,
    land_syncs,
    new_process,
    physical_by_day,
    run,
    visible,
)

from lakehistory.command.commands import Inspector
from lakehistory.errors import HistoryError
from lakehistory.history import ledger, records, transactions, turn
from lakehistory.landing.batch import Sync
from lakehistory.landing.spec import BatchError
from lakehistory.landing.syncs import SyncOf, gather, parse_sidecar


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("syncs"), "syncs")


@pytest.fixture(scope="module")
def cut_sql(engine: Engine) -> tuple[str, str]:
    return compile_cut(engine)


@pytest.fixture(scope="module")
def visible_sql(cut_sql: tuple[str, str]) -> str:
    return cut_sql[0]


PLAN = {1: ["a", "b"], 2: ["a"], 3: ["a", "b"], 4: ["b"]}


def test_a_sync_applied_by_parallel_nodes_is_one_transaction_and_the_tables_equal_those_applied_alone(
    engine: Engine, visible_sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four syncs, one of them without table b's batch and one without a's, applied by two nodes
    at once, each catching up its syncs in one pass: one id per sync, gap-free, in sync order,
    a row per table of it, and each table as its batches applied without syncs give it."""
    new_process(monkeypatch)
    first = visible(engine, visible_sql)
    tables = land_syncs(engine, "par", PLAN)
    run(engine, tables, "par-1", threads=True)
    got = ids_by_sync(engine, "par")
    base = min(txn for rows in got.values() for txn, _ in rows) - 1
    assert got == {
        "par-s1": [(base + 1, "par_a"), (base + 1, "par_b")],
        "par-s2": [(base + 2, "par_a")],
        "par-s3": [(base + 3, "par_a"), (base + 3, "par_b")],
        "par-s4": [(base + 4, "par_b")],
    }
    assert base >= first and visible(engine, visible_sql) == base + 4
    uuids = engine.project.rows(
        f"select txn_id, count(distinct txn_uuid) as uuids, count(distinct started_at) as starts,"
        f" count(distinct author) as authors from {engine.transactions} where sync_id like 'par-%' group by txn_id"
    )
    assert all(r["uuids"] == r["starts"] == r["authors"] == 1 for r in uuids), uuids
    for name in ("par_a", "par_b"):
        land_alone(engine, f"{name}_alone", PLAN, name)
        engine.apply(f"{name}_alone", COLUMNS, ["id"])
        assert physical_by_day(engine, name) == physical_by_day(engine, f"{name}_alone"), name


def test_a_sync_s_tables_commit_side_by_side_and_are_recorded_in_one_statement(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes of one sync write their tables at once (each commits while the other writes:
    with commits made in turn, the second could not write before the first's record). The first
    to commit waits for the other, and one record takes both."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "tog", {1: ["a", "b"], 2: ["a", "b"]})
    both_writing = threading.Barrier(2, timeout=120)
    writing, record = records.writing, ledger.record
    recorded: list[list[str]] = []

    @contextlib.contextmanager
    def writing_together(transactions, target):  # type: ignore[no-untyped-def]
        with writing(transactions, target) as mine:
            both_writing.wait()
            yield mine

    def counted(spark, transactions, commits, uuid_sql):  # type: ignore[no-untyped-def]
        commits = list(commits)
        recorded.append(sorted(target for target, _ in commits))
        return record(spark, transactions, commits, uuid_sql)

    monkeypatch.setattr(records, "writing", writing_together)
    monkeypatch.setattr(records, "PEERS_SECONDS", 120)  # however slow the other's MERGE is here
    monkeypatch.setattr(ledger, "record", counted)
    run(engine, tables, "tog-1", threads=True)
    assert recorded == [sorted(engine.target(t) for t in tables)], recorded
    got = ids_by_sync(engine, "tog")
    s1 = got["tog-s1"][0][0]
    assert got == {"tog-s1": [(s1, "tog_a"), (s1, "tog_b")], "tog-s2": [(s1 + 1, "tog_a"), (s1 + 1, "tog_b")]}


def test_a_table_applied_after_another_in_the_same_hold_reads_neither_its_history_nor_the_visibility(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a run's first table has read the transactions table under the writer lock, what the
    process knows answers for the others while the hold lasts: the last commit of a table (no
    `describe history` before its rules, only the one that finds its own commit after the MERGE)
    and what a record makes visible (no read of the transactions table or its syncs table). The
    tables and the ledger are as an uninterrupted run leaves them (run's own check)."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "known", {1: ["a", "b", "c"]})
    run(engine, tables, "known-1")  # creates the tables
    tables = land_syncs(engine, "known", {2: ["a", "b", "c"]})
    sql, said = type(engine.project.spark).sql, []

    def seen(spark, statement, *args, **kwargs):  # type: ignore[no-untyped-def]
        said.append(" ".join(str(statement).split()))
        return sql(spark, statement, *args, **kwargs)

    monkeypatch.setattr(type(engine.project.spark), "sql", seen)
    run(engine, tables, "known-2")
    monkeypatch.undo()
    described = [s for s in said if s.startswith("describe history")]
    assert len(described) == 1 + len(tables), described  # the first table's before its rules; each one's own commit
    visibility_reads = [s for s in said if "as `last_visible`" in s]
    assert len(visibility_reads) == 1, visibility_reads  # the first record's
    got = ids_by_sync(engine, "known")
    s2 = got["known-s2"][0][0]
    assert got["known-s2"] == [(s2, f"known_{t}") for t in ("a", "b", "c")]


def test_a_commit_whose_thread_stopped_before_its_record_is_recorded_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table a's node stops after its commit waits for the turn (its record never runs); table
    b's node, in the same process, records a's commit in its recovery: the commit that waited is
    not recorded again with b's."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "stale", {1: ["a", "b"]})
    for i, table in enumerate(tables):
        engine.stage(table, COLUMNS, ["id"], "stale-1", run_tables=tables if i == 0 else ())

    def stopped(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("stopped before its record")

    with monkeypatch.context() as patched:
        patched.setattr(records, "record_waiting", stopped)
        with pytest.raises(RuntimeError, match="before its record"):
            engine.apply_staged(tables[0], COLUMNS, ["id"], invocation_id="stale-1", history_tables=tables)
    engine.apply_staged(tables[1], COLUMNS, ["id"], invocation_id="stale-1", history_tables=tables)
    got = ids_by_sync(engine, "stale")
    assert got == {"stale-s1": [(got["stale-s1"][0][0], "stale_a"), (got["stale-s1"][0][0], "stale_b")]}


def test_the_transactions_table_and_its_syncs_table_are_compacted_as_they_grow(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every record and reservation adds a file: once the transactions table holds
    COMPACT_AT_FILES of them (4 here, after three runs), the next run's first writer rewrites
    both tables into a few files, with every row as it was."""
    syncs_table = transactions.syncs_relation(engine.transactions)

    def files(table: str) -> int:
        return int(engine.project.rows(f"describe detail {table}")[0]["numFiles"])

    def rows(table: str) -> list[tuple]:
        found = engine.project.rows(f"select * from {table}")
        return sorted((tuple(tuple(v) if isinstance(v, list) else v for v in r.values()) for r in found), key=repr)

    for n in (1, 2, 3):
        tables = land_syncs(engine, "cmp", {n: ["a", "b"]})
        new_process(monkeypatch)
        run(engine, tables, f"cmp-{n}")
    assert files(engine.transactions) >= 4 and files(syncs_table) >= 3
    kept, kept_syncs = rows(engine.transactions), rows(syncs_table)
    monkeypatch.setattr(transactions, "COMPACT_AT_FILES", 4)
    land_syncs(engine, "cmp", {4: ["a", "b"]})
    new_process(monkeypatch)
    run(engine, tables, "cmp-4")
    # one file each, and what run 4 wrote since: its two records and its reservation
    assert files(engine.transactions) <= 3 and files(syncs_table) <= 2
    assert [r for r in rows(engine.transactions) if r not in kept] == [
        r for r in rows(engine.transactions) if "cmp-s4" in r
    ]
    assert set(kept) <= set(rows(engine.transactions)) and set(kept_syncs) <= set(rows(syncs_table))
    assert [sync for sync, tables_of in ids_by_sync(engine, "cmp").items() if len(tables_of) != 2] == []


def test_ids_follow_the_syncs_order_whichever_table_applies_first(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table b, which has no batch in the first sync, applies first: the first sync still gets
    the first id, reserved with b's."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "ord", {1: ["a"], 2: ["a", "b"]})
    run(engine, list(reversed(tables)), "ord-1")
    got = ids_by_sync(engine, "ord")
    assert got["ord-s1"][0][0] + 1 == got["ord-s2"][0][0], got


def test_a_sync_is_visible_only_once_every_table_applied_it_and_the_next_run_completes_it(
    engine: Engine, visible_sql: str, cut_sql: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table a's batch of the second sync is bad: a's model fails, b's applies the sync. The cut
    stays before the sync, however many transactions come after it; once a's batch is landed
    again, fixed, the next run applies it under the sync's id and the cut moves past it.
    `lakehistory status` shows the cut and the sync waiting for table a."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "fail", {1: ["a", "b"]})
    run(engine, tables, "fail-1")
    land_syncs(engine, "fail", {2: ["a", "b"]})
    data = next(p for p in (engine.project.landing / "fail_a" / "000002").iterdir() if p.name != "manifest.json")
    kept = data.read_bytes()
    data.write_bytes(b"not,a,batch\n")
    new_process(monkeypatch)
    with pytest.raises(BatchError, match="000002"):
        run(engine, tables, "fail-2")
    run(engine, ["fail_b"], "fail-3")
    got = ids_by_sync(engine, "fail")
    first, second = got["fail-s1"][0][0], got["fail-s2"][0][0]
    assert got["fail-s2"] == [(second, "fail_b")]
    assert visible(engine, visible_sql) == first == second - 1
    engine.land("fail_later", [batch("fail_later", 1, None, {1: "later"})])
    engine.apply("fail_later", COLUMNS, ["id"])
    assert visible(engine, visible_sql) == first, "a later transaction does not make half a sync visible"
    assert_visibility_recorded(engine, visible_sql)
    inspector = Inspector(engine.project.spark, {}, engine.transactions, "integer")
    inspector.visible_sql, inspector.incomplete_syncs_sql = (
        visible_sql.replace("__AT__", "current_timestamp()"),
        cut_sql[1],
    )
    status = inspector.status().splitlines()
    assert f"(version_at): transaction {first}" in "\n".join(status)
    assert [line.split() for line in status if line.startswith(str(second))] == [
        [str(second), "fail-s2", "fail_b", "fail_a"]
    ]
    data.write_bytes(kept)
    new_process(monkeypatch)
    run(engine, tables, "fail-4")
    assert ids_by_sync(engine, "fail")["fail-s2"] == [(second, "fail_a"), (second, "fail_b")]
    assert visible(engine, visible_sql) == max(engine.ids_of("fail_later"))
    assert_visibility_recorded(engine, visible_sql)


def assert_visibility_recorded(engine: Engine, visible_sql: str) -> None:
    """Seed 002's columns the recording writes, on every row of the transactions table: a row
    index of its own; the database id of the transaction's uuid; and `visible_at` exactly when the
    consistent cut reached the transaction (the cut at that instant includes it, a microsecond
    before does not), NULL for a transaction not visible yet."""
    rows = engine.project.rows(
        f"select txn_id, row_index, database_id, visible_at,"
        f" date_format(visible_at, 'yyyy-MM-dd HH:mm:ss.SSSSSS') as at from {engine.transactions}"
    )
    assert len({r["row_index"] for r in rows}) == len(rows) and all(r["row_index"] for r in rows)
    assert {r["database_id"] for r in rows} == {0}
    now = visible(engine, visible_sql)
    assert {r["txn_id"] for r in rows if r["visible_at"] is None} == {r["txn_id"] for r in rows if r["txn_id"] > now}
    became: dict[str, set[int]] = {}
    for r in rows:
        if r["at"]:
            became.setdefault(r["at"], set()).add(r["txn_id"])
    for at, ids in became.items():
        assert visible(engine, visible_sql, f"timestamp'{at}'") >= max(ids), (ids, at)
        assert visible(engine, visible_sql, f"timestamp'{at}' - interval 1 microsecond") < min(ids), (ids, at)


KILL_PLAN = {1: ["a", "b"], 2: ["a", "b"]}


@pytest.fixture(scope="module")
def uninterrupted(engine: Engine) -> dict[str, list[tuple]]:
    """The tables of KILL_PLAN applied by a run never stopped, by table name (a, b)."""
    tables = land_syncs(engine, "kill", KILL_PLAN)
    with pytest.MonkeyPatch.context() as monkeypatch:
        new_process(monkeypatch)
        run(engine, tables, "kill-0")
    return {t.removeprefix("kill_"): physical_by_day(engine, t) for t in tables}


# Stopped in the first table the run applies (whose writer reserves both syncs) at each point, or
# in the second with its commit unrecorded (the next run's recovery records it under the sync's
# reserved id). The points the batch path without syncs has too are stopped at in test_stops.py:
# here in `make test-slow`.
@pytest.mark.parametrize(
    ("point", "which"),
    [
        pytest.param(point, 0, id=point, marks=[] if point in ("reserved", "committed") else [pytest.mark.slow])
        for point in turn.STOP_POINTS
    ]
    + [pytest.param("committed", 1, id="committed_in_the_second_table")],
)
def test_a_sync_stopped_anywhere_and_run_again_converges(
    engine: Engine, uninterrupted: dict, monkeypatch: pytest.MonkeyPatch, point: str, which: int
) -> None:
    """Two syncs of two tables, the run stopped, then run again as a new process: the same ids
    per sync (consecutive, a row per table) and the same tables as a run never stopped."""
    prefix = f"kill_{point}_{which}"
    tables = land_syncs(engine, prefix, KILL_PLAN)

    def stop(name: str) -> None:
        if name == point:
            raise RuntimeError(f"stopped at {name}")

    new_process(monkeypatch)
    for i, table in enumerate(tables):
        engine.stage(table, COLUMNS, ["id"], f"{prefix}-1", run_tables=tables if i == 0 else ())
    if which == 1:
        engine.apply_staged(tables[0], COLUMNS, ["id"], invocation_id=f"{prefix}-1", history_tables=tables)
    monkeypatch.setattr(turn, "reached", stopping("apply", stop))
    with pytest.raises(RuntimeError, match="stopped"):
        engine.apply_staged(tables[which], COLUMNS, ["id"], invocation_id=f"{prefix}-1", history_tables=tables)
    monkeypatch.setattr(turn, "reached", lambda operation, point: None)
    new_process(monkeypatch)  # its lock's row says whether the stopped run left a commit unrecorded
    run(engine, tables, f"{prefix}-2")
    got = ids_by_sync(engine, prefix)
    s1 = got[f"{prefix}-s1"][0][0]
    assert got == {
        f"{prefix}-s1": [(s1, f"{prefix}_a"), (s1, f"{prefix}_b")],
        f"{prefix}-s2": [(s1 + 1, f"{prefix}_a"), (s1 + 1, f"{prefix}_b")],
    }
    for t in tables:
        assert physical_by_day(engine, t) == uninterrupted[t.removeprefix(f"{prefix}_")], t
    ids = sorted({r["txn_id"] for r in engine.project.rows(f"select txn_id from {engine.transactions}")})
    assert ids == list(range(1, len(ids) + 1)), "ids are gap-free across every run"


def test_a_batch_of_its_own_before_a_sync_another_table_applied_is_refused_with_nothing_applied(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table a lands a batch without a sync, then a sync with b; b applies the sync first. a's
    batch would need an id after the sync's while coming before it: refused, naming both."""
    new_process(monkeypatch)
    engine.land("mix_a", [batch("mix_a", 1, None, {1: "own"})])
    sync = Sync("mix-s1", 2, ("mix_a", "mix_b"))
    engine.land("mix_a", [batch("mix_a", 2, sync, {2: "synced"})])
    engine.land("mix_b", [batch("mix_b", 2, sync, {2: "synced"})])
    run(engine, ["mix_b"], "mix-1")
    with pytest.raises(HistoryError, match="000002.*mix-s1"):
        run(engine, ["mix_a"], "mix-2")
    assert not engine.project.spark.catalog.tableExists(f"{engine.project.schema}.mix_a")


def test_batches_that_say_different_things_of_one_sync_are_refused(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_process(monkeypatch)
    engine.land("odd_a", [batch("odd_a", 1, Sync("odd-s1", 1, ("odd_a", "odd_b")), {1: "x"})])
    engine.land("odd_b", [batch("odd_b", 1, Sync("odd-s1", 7, ("odd_a", "odd_b")), {1: "x"})])
    with pytest.raises(BatchError, match="odd-s1"):
        run(engine, ["odd_a", "odd_b"], "odd-1")
    engine.land("odd_c", [batch("odd_c", 1, Sync("odd-s2", 1, ("odd_b",)), {1: "x"})])
    with pytest.raises(BatchError, match="but not this one"):
        run(engine, ["odd_c"], "odd-2")


def test_a_run_of_some_tables_reserves_the_syncs_before_theirs_that_their_syncs_other_tables_owe(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync 1 holds table a, sync 2 tables a and b; a run of b alone (a schedule per table) reads
    a's pending syncs too, so sync 1 takes its id before sync 2, and a's run applies both in
    order (before: sync 2 took the id before sync 1's, and every run of a was refused for good).
    A sync that names a table no model of the project reads is refused, naming it."""
    new_process(monkeypatch)
    tables = land_syncs(engine, "sel", {1: ["a"], 2: ["a", "b"]})
    run(engine, ["sel_b"], "sel-1", project=tables)
    new_process(monkeypatch)
    run(engine, ["sel_a"], "sel-2", project=tables)
    got = ids_by_sync(engine, "sel")
    base = got["sel-s1"][0][0] - 1
    assert got == {"sel-s1": [(base + 1, "sel_a")], "sel-s2": [(base + 2, "sel_a"), (base + 2, "sel_b")]}
    new_process(monkeypatch)
    engine.land("sel_b", [batch("sel_b", 3, Sync("sel-s3", 3, ("sel_b", "sel_ghost")), {1: "x"})])
    with pytest.raises(BatchError, match="names table 'sel_ghost', but no history model"):
        run(engine, ["sel_b"], "sel-3", project=tables)


def test_what_a_landing_says_of_its_syncs() -> None:
    """No Spark: the syncs of pending manifests, a contradiction refused for both tables it
    involves, and an extract's sync file read or refused with what is wrong in it."""
    sync = {"id": "c-1", "sequence": 1, "tables": ["b", "a"]}
    a = [{"batch_id": "000001", "sync": sync, "author": "x", "app_id": "y"}, {"batch_id": "000002"}]
    b = [{"batch_id": "000007", "sync": sync, "author": "x", "app_id": "y"}]
    found, errors = gather({"a": a, "b": b})
    assert found == {"c-1": SyncOf("c-1", 1, ("a", "b"), "x", "y")} and errors == {}
    c = [{"batch_id": "000003", "sync": {**sync, "sequence": 2, "tables": ["a", "c"]}, "author": "x", "app_id": "y"}]
    _, errors = gather({"a": a, "c": c})
    assert set(errors) == {"a", "c"} and "000001" in str(errors["c"]) and "000003" in str(errors["a"])
    # a sync that does not say what it must is its own table's problem, named by its batch
    bad = [{"batch_id": "000004", "sync": {"id": "c-2", "tables": ["d"]}}]
    _, errors = gather({"a": a, "b": b, "d": bad})
    assert set(errors) == {"d"} and "000004" in str(errors["d"]) and "needs a 'sequence'" in str(errors["d"])

    good = b'{"id": "c-1", "sequence": 1, "tables": ["a", "m"], "author": "x", "app_id": "y"}'
    assert parse_sidecar("2024-01-01.sync.json", good, "m") == SyncOf("c-1", 1, ("a", "m"), "x", "y")
    for content, said in (
        (b'{"id": "c-1", "sequence": 1, "tables": ["a"]}', "but not this one, 'm'"),
        (b'{"id": "c-1", "sequence": "1", "tables": ["m"]}', "expected an integer"),
        (b'{"id": "../x", "sequence": 1, "tables": ["m"]}', "letters, digits"),
        (b'{"id": "c-1", "sequence": 1, "tables": ["m", "m"]}', "each landed table once"),
        (b"{", "not UTF-8 JSON"),
    ):
        with pytest.raises(BatchError, match=re.escape(said)):
            parse_sidecar("2024-01-01.sync.json", content, "m")


def test_a_transactions_table_of_the_earlier_layout_gains_the_recording_columns_with_their_values(
    engine: Engine,
) -> None:
    """A transactions table made before the row index, database id and visibility existed: the
    next run adds them and fills them from its rows (the half-applied sync not visible, nor the
    transaction after it); the row that completes the sync then makes both visible at once, when
    the last of them was done."""
    spark = engine.project.spark
    schema = engine.transactions.rsplit(".", 1)[0]
    old = f"{schema}.`earlier_transactions`"
    earlier = tuple(f for f in transactions.LAYOUT if f.name not in transactions.RECORDING_COLUMNS)
    spark.sql(transactions.create_sql(old, earlier))
    spark.sql(transactions.create_sql(transactions.syncs_relation(old), transactions.SYNCS_LAYOUT))
    uuid = "'00000000-0000-4000-8000-00000000002a'"  # database id 42

    def row(txn_id: int, table: str, committed: str, sync: str | None) -> str:
        sync_sql = f"'{sync}'" if sync else "null"
        return (
            f"select {txn_id}, {uuid}, 'batch', '{table}', 'h_{table}', 'b{txn_id}', {txn_id}, null, null, null,"
            f" timestamp'2024-03-0{txn_id} 00:00:00', timestamp'{committed}', 1, 1, 0, 0, 0, {txn_id},"
            f" {sync_sql}, null, null"
        )

    spark.sql(
        f"insert into {old} ({transactions.column_list()}) "
        + " union all ".join(
            [
                row(1, "x", "2024-03-01 10:00:00", None),
                row(2, "a", "2024-03-02 10:00:00", "s2"),
                row(3, "x", "2024-03-03 10:00:00", None),
            ]
        )
    )
    spark.sql(
        f"insert into {transactions.syncs_relation(old)} select 2, 's2', 2, array('a', 'b'), null, null,"
        " timestamp'2024-03-02 00:00:00', timestamp'2024-03-02 00:00:00', null"
    )
    ledger.ensure_transactions_table(spark, old)
    filled = [
        tuple(r)
        for r in spark.sql(
            f"select txn_id, row_index, database_id, cast(visible_at as string) from {old} order by txn_id"
        ).collect()
    ]
    assert filled == [(1, 1, 42, "2024-03-01 10:00:00"), (2, 2, 42, None), (3, 3, 42, None)]
    completing = spark.sql(row(2, "b", "2024-03-04 10:00:00", "s2")).toDF(*transactions.COLUMNS)
    ledger.insert_transactions(spark, old, completing, 2)
    done = [
        tuple(r)
        for r in spark.sql(
            f"select txn_id, history_table, row_index, cast(visible_at as string) from {old} order by row_index"
        ).collect()
    ]
    assert done == [
        (1, "h_x", 1, "2024-03-01 10:00:00"),
        (2, "h_a", 2, "2024-03-04 10:00:00"),
        (3, "h_x", 3, "2024-03-04 10:00:00"),
        (2, "h_b", 4, "2024-03-04 10:00:00"),
    ]
