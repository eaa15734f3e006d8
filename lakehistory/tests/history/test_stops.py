"""A run stopped at any point of the batch path, then run again, gives exactly the tables and
transactions of a run that was never stopped: every batch applied once, ids gap-free, counts
included.

The run is stopped at each named point of the engine in turn (`turn.STOP_POINTS`, in every
group the run commits), as a killed process would stop it: nothing after the point happens, and
the process state is gone (the rerun starts with none)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from engine_case import Engine, stopping

from lakehistory.history import apply, lock, turn
from lakehistory.landing.batch import TMAX, Batch, Column, SchemaChange
from lakehistory.names import END, START

BASE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
COLUMNS = [Column("id", "bigint"), Column("name", "string")]


def at(hours: float) -> dt.datetime:
    return BASE + dt.timedelta(hours=hours)


def version(id_: int, name: str, start: float, end: dt.datetime = TMAX) -> dict:
    return {
        "id": id_,
        "name": name,
        START: at(start),
        END: end,
        "_fivetran_active": end == TMAX,
        "_fivetran_synced": at(start),
    }


def batches(with_earliest: bool) -> list[Batch]:
    """Five batches in two groups (the third adds a column, which starts a group): inserts,
    updates of every key, a delete, a version that comes back."""
    rows = [
        [version(1, "a", 1), version(2, "b", 1), version(3, "c", 1)],
        [version(1, "a2", 2), version(2, "b2", 2)],
        [],
        [version(1, "a3", 4), version(3, "c2", 4)],
        [version(2, "b3", 5)],
    ]
    out = []
    for n, versions in enumerate(rows, start=1):
        earliest = [{"id": v["id"], START: v[START]} for v in versions] if with_earliest else []
        changes = [SchemaChange("add_column", "note", at(3), type="string", default="x")] if n == 3 else []
        deletes = [{"id": 3, END: at(4.5)}] if n == 4 else []
        out.append(
            Batch(
                table="t",
                batch_id=f"{n:06d}",
                sequence=n,
                key=["id"],
                columns=COLUMNS,
                replace=versions,
                delete=deletes,
                earliest=earliest,
                schema_changes=changes,
            )
        )
    return out


class StoppedError(Exception):
    """The run stops here."""


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("stops"), "stops")


# Without earliest starts the rules compute differently but stop at the same points: `make test`
# stops the run with earliest starts at every point; the other runs in `make test-slow`.
@pytest.mark.parametrize(
    "with_earliest",
    [pytest.param(True, id="earliest_starts"), pytest.param(False, marks=pytest.mark.slow, id="no_earliest_starts")],
)
def test_a_run_stopped_anywhere_and_run_again_converges(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, with_earliest: bool
) -> None:
    stream = batches(with_earliest)
    label = "e" if with_earliest else "n"
    columns = [*COLUMNS, Column("note", "string")]
    reference = f"ref_{label}"
    engine.land(reference, stream)
    assert engine.apply(reference, columns, ["id"])["groups"] == 2
    want = (engine.physical(reference), engine.transactions_of(reference))
    # Without earliest starts only the group's own points differ from the run above.
    points = turn.STOP_POINTS if with_earliest else apply.GROUP_STOP_POINTS
    for point in points:
        for occurrence in (1, 2) if point in apply.GROUP_STOP_POINTS else (1,):  # each group's
            table = f"stop_{label}_{point}_{occurrence}"
            engine.land(table, stream)
            seen = []

            def stop(name: str, point=point, occurrence=occurrence, seen=seen) -> None:
                seen.append(name)
                if seen.count(point) == occurrence:
                    raise StoppedError(name)

            monkeypatch.setattr(turn, "reached", stopping("apply", stop))
            stopped = True
            try:
                engine.apply(table, columns, ["id"])
                stopped = False
            except StoppedError:
                pass
            monkeypatch.setattr(turn, "reached", lambda operation, point: None)
            # A new process: no memory of the stopped run.
            engine.new_process()
            monkeypatch.setattr(lock, "unrecorded", {})
            engine.apply(table, columns, ["id"])
            got = (engine.physical(table), engine.transactions_of(table))
            assert got == want, f"stopped at {point} #{occurrence} (stopped: {stopped})"
            ids = engine.ids_of(table)
            assert len(ids) == len(stream) and len(set(ids)) == len(ids), f"ids after a stop at {point}"
    all_ids = sorted(r["txn_id"] for r in engine.project.rows(f"select txn_id from {engine.transactions}"))
    assert all_ids == list(range(1, len(all_ids) + 1)), "transaction ids are gap-free across every table"
