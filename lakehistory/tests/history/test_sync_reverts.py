"""A revert or undo of several tables is one transaction, as a sync is: one id for every table it
changes, visible to readers of the consistent cut once each table recorded it; an undo of a sync
undoes all its tables. Stopped anywhere, it is completed by asking it again, and until then its
tables take no other transaction.

The engine is called as the run-operations call it (engine_case.py), on dbt's Spark session and
real Delta tables; tests/history/test_revert.py runs the run-operations themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_case import Engine, stopping
from sync_case import batch, compile_cut, ids_by_sync, land_syncs, new_process, run, visible

from lakehistory.errors import HistoryError
from lakehistory.history import turn

KEY = ["id"]


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("sync_reverts"), "sync_reverts")


@pytest.fixture(scope="module")
def visible_sql(engine: Engine) -> str:
    return compile_cut(engine)[0]


def state(engine: Engine, table: str, txn: int) -> list[tuple]:
    """The table's rows as of transaction `txn`, without valid_from / valid_to, sorted."""
    rows = engine.project.rows(
        f"select * from `{engine.project.schema}`.`{table}` where valid_from <= {int(txn)} and {int(txn)} < valid_to"
    )
    return sorted(tuple(v for k, v in r.items() if k not in ("valid_from", "valid_to")) for r in rows)


def rows_of(engine: Engine, txn: int) -> list[tuple]:
    """The transaction's rows: (table, operation, sync id), and how many uuids and starts they have."""
    found = engine.project.rows(
        f"select history_table, operation, sync_id, txn_uuid, started_at from {engine.transactions}"
        f" where txn_id = {int(txn)} order by history_table"
    )
    assert len({r["txn_uuid"] for r in found}) == len({r["started_at"] for r in found}) == 1, found
    return [(r["history_table"].split("`.`")[-1].strip("`"), r["operation"], r["sync_id"]) for r in found]


def gap_free(engine: Engine) -> bool:
    ids = sorted({r["txn_id"] for r in engine.project.rows(f"select txn_id from {engine.transactions}")})
    return ids == list(range(1, len(ids) + 1))


def test_an_undo_of_a_sync_and_a_revert_of_several_tables_are_each_one_transaction(
    engine: Engine, visible_sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_process(monkeypatch)
    a, b = tables = land_syncs(engine, "one", {1: ["a", "b"], 2: ["a", "b"]})
    run(engine, tables, "one-1")
    synced = ids_by_sync(engine, "one")
    s1, s2 = synced["one-s1"][0][0], synced["one-s2"][0][0]
    after = {v: {t: state(engine, t, v) for t in tables} for v in (s1, s2)}
    assert after[s1] != after[s2]

    # The undo of the second sync, naming no model: both its tables, one transaction.
    undo = engine.revert(tables, KEY, undo_txn=s2, named=False)
    n = undo["transaction"]
    assert n == s2 + 1 and set(undo["tables"]) == {a, b}
    assert rows_of(engine, n) == [(a, "revert", f"lakehistory:undo:{n}"), (b, "revert", f"lakehistory:undo:{n}")]
    assert {t: state(engine, t, n) for t in tables} == after[s1]
    assert visible(engine, visible_sql) == n
    again = engine.revert(tables, KEY, undo_txn=s2, named=False)
    assert (again["transaction"], again["already_done"]) == (n, True)

    # Both tables back to the second sync: one transaction again.
    m = engine.revert(tables, KEY, to_txn=s2)["transaction"]
    assert m == n + 1 and [r[0] for r in rows_of(engine, m)] == [a, b]
    assert {t: state(engine, t, m) for t in tables} == after[s2]

    # The undo of that revert in one table alone.
    k = engine.revert([a], KEY, undo_txn=m)["transaction"]
    assert k == m + 1 and rows_of(engine, k) == [(a, "revert", f"lakehistory:undo:{k}")]
    assert (state(engine, a, k), state(engine, b, k)) == (after[s1][a], after[s2][b])
    assert visible(engine, visible_sql) == k and gap_free(engine)


# Stopped after the reservation, after the first table's commit, or after both commits (their
# record left to the next writer's recovery); the last two in `make test-slow`.
@pytest.mark.parametrize(
    ("point", "nth"),
    [
        ("reserved", 1),
        pytest.param("committed", 1, marks=pytest.mark.slow),
        pytest.param("committed", 2, marks=pytest.mark.slow),
    ],
)
def test_a_revert_of_two_tables_stopped_anywhere_is_completed_by_asking_it_again(
    engine: Engine, visible_sql: str, monkeypatch: pytest.MonkeyPatch, point: str, nth: int
) -> None:
    prefix = f"stop_{point}_{nth}"
    new_process(monkeypatch)
    a, b = tables = land_syncs(engine, prefix, {1: ["a", "b"], 2: ["a", "b"]})
    run(engine, tables, f"{prefix}-1")
    synced = ids_by_sync(engine, prefix)
    s1, s2 = synced[f"{prefix}-s1"][0][0], synced[f"{prefix}-s2"][0][0]
    want = {t: state(engine, t, s1) for t in tables}
    reached: list[str] = []

    def stop(name: str) -> None:
        reached.append(name)
        if name == point and reached.count(point) == nth:
            raise RuntimeError(f"stopped at {name}")

    monkeypatch.setattr(turn, "reached", stopping("revert", stop))
    with pytest.raises(RuntimeError, match="stopped"):
        engine.revert(tables, KEY, to_txn=s1)
    monkeypatch.setattr(turn, "reached", lambda operation, point: None)
    new_process(monkeypatch)
    n = s2 + 1
    if (point, nth) != ("committed", 2):
        assert visible(engine, visible_sql) == s2, "half a revert is not visible"
        engine.land(b, [batch(b, 3, None, {1: "later"})])
        with pytest.raises(HistoryError, match=f"lakehistory.revert --args .*{b}"):
            run(engine, [b], f"{prefix}-2")
        with pytest.raises(HistoryError, match=f"transaction {n} was stopped before"):
            engine.revert(tables, KEY, to_txn=s2)

    new_process(monkeypatch)
    done = engine.revert(tables, KEY, to_txn=s1)
    assert (done["transaction"], done["already_done"]) == (n, (point, nth) == ("committed", 2))
    assert rows_of(engine, n) == [(t, "revert", f"lakehistory:revert:{n}") for t in tables]
    assert {t: state(engine, t, n) for t in tables} == want
    assert visible(engine, visible_sql) == n
    if (point, nth) != ("committed", 2):
        run(engine, [b], f"{prefix}-3")
        assert (1, "later") in [(r[0], r[1]) for r in state(engine, b, n + 1)]
    assert gap_free(engine)
