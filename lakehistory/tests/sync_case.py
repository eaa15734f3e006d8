"""Syncs under test: batches of several tables landed as syncs, applied as dbt's nodes of one
invocation would apply them (in order or in threads), and what the transactions table and the
consistent cut say of them (tests/history/test_syncs.py, test_sync_reverts.py)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence

import pytest
from engine_case import Engine

from lakehistory import invocation as invocations
from lakehistory.history import ledger, lock, records, syncs
from lakehistory.landing.batch import TMAX, Batch, Column, Sync
from lakehistory.names import END, START

COLUMNS = [Column("id", "bigint"), Column("name", "string")]
DAY = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def compile_cut(engine: Engine) -> tuple[str, str]:
    """The macros' SQL for the last visible transaction id at instant `__AT__`, and for the syncs
    not visible now."""
    compiled = engine.project.compile_inline(
        "{{ lakehistory.visible_txn_sql('__AT__') }}\n;;\n{{ lakehistory.incomplete_syncs_sql() }}"
    )
    visible, incomplete = compiled.split(";;")
    return visible.strip(), incomplete.strip()


def visible(engine: Engine, visible_sql: str, at: str = "current_timestamp()") -> int:
    return int(engine.project.spark.sql("select " + visible_sql.replace("__AT__", at)).collect()[0][0])


def batch(table: str, sequence: int, sync: Sync | None, names: dict[int, str]) -> Batch:
    """Batch `sequence` of `table`: key k now holds names[k] (a new version of it from that day)."""
    start = DAY + dt.timedelta(days=sequence)
    rows = [
        {"id": k, "name": v, START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
        for k, v in names.items()
    ]
    earliest = [{"id": k, START: start} for k in names]
    return Batch(table, f"{sequence:06d}", sequence, ["id"], COLUMNS, replace=rows, earliest=earliest, sync=sync)


def land_syncs(engine: Engine, prefix: str, plan: dict[int, list[str]]) -> list[str]:
    """Land sync n (sequence n, id `<prefix>-s<n>`) with one batch of sequence n for each of its
    tables; returns the tables, `<prefix>_<name>`. Batch n of a table gives key n % 3 + 1 the
    name `v<n>`."""
    tables = sorted({f"{prefix}_{t}" for names in plan.values() for t in names})
    for n, names in sorted(plan.items()):
        held = tuple(f"{prefix}_{t}" for t in names)
        sync = Sync(f"{prefix}-s{n}", n, held)
        for table in held:
            engine.land(table, [batch(table, n, sync, {n % 3 + 1: f"v{n}"})])
    return tables


def land_alone(engine: Engine, table: str, plan: dict[int, list[str]], name: str) -> None:
    """The same batches of `name` as land_syncs lands, without a sync, under `table`."""
    for n, names in sorted(plan.items()):
        if name.split("_", 1)[1] in names:
            engine.land(table, [batch(table, n, None, {n % 3 + 1: f"v{n}"})])


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new dbt process starts with: nothing this one read or held."""
    lock.let_go_all()
    monkeypatch.setattr(invocations, "_current", None)
    for module, name in (
        (lock, "unrecorded"),
        (syncs, "_seen"),
        (ledger, "_known"),
        (records, "_waiting"),
    ):
        monkeypatch.setattr(module, name, type(getattr(module, name))())


def run(engine: Engine, tables: list[str], invocation: str, threads: bool = False, project: Sequence[str] = ()) -> None:
    """One dbt invocation of the tables' models: staged (the first staging reads them all), then
    applied in `tables` order, or each in its own thread as dbt's threads would. `project`: every
    table the project has a history model of (the invocation may select fewer)."""
    for i, table in enumerate(tables):
        first = i == 0
        engine.stage(
            table, COLUMNS, ["id"], invocation, run_tables=tables if first else (), project=project if first else ()
        )
    history = [*tables]

    def one(table: str) -> None:
        engine.apply_staged(table, COLUMNS, ["id"], invocation_id=invocation, history_tables=history)

    if not threads:
        for table in tables:
            one(table)
        assert_known_is_the_table(engine)
        return
    errors: list[BaseException] = []

    def guarded(table: str) -> None:
        try:
            one(table)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=guarded, args=(t,)) for t in tables]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    assert_known_is_the_table(engine)


def assert_known_is_the_table(engine: Engine) -> None:
    """What this process keeps of the transactions table while its hold of the writer lock lasts
    (ledger._Known: each table's last id and version, and the visibility its records computed
    without reading the table) is what the table holds."""
    known = ledger._known.get(engine.transactions)
    if known is None or known.hold != lock.active_hold():
        return
    spark = engine.project.spark
    read = ledger._read_known(spark, engine.transactions, known.hold)
    assert (known.last_id, known.tables) == (read.last_id, read.tables)
    if known.visibility is not None:
        seen, table = known.visibility, ledger._read_visibility(spark, engine.transactions)
        assert (seen.last_index, seen.last_visible, seen.since) == (table.last_index, table.last_visible, table.since)
        assert sorted(seen.waiting, key=repr) == sorted(table.waiting, key=repr)
        assert seen.reserved == table.reserved


def ids_by_sync(engine: Engine, prefix: str) -> dict[str, list[tuple[int, str]]]:
    """Per sync, its rows of the transactions table: (id, table)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for r in engine.project.rows(
        f"select sync_id, txn_id, source_table from {engine.transactions}"
        f" where sync_id like '{prefix}-%' order by txn_id, source_table"
    ):
        found.setdefault(r["sync_id"], []).append((r["txn_id"], r["source_table"]))
    return found


def physical_by_day(engine: Engine, table: str) -> list[tuple]:
    """The table's rows, each with the transactions' batch sequences for valid_from and valid_to
    (the day of the sync in these landings), sorted."""
    day = {
        (r["txn_id"], r["source_table"]): r["batch_sequence"]
        for r in engine.project.rows(f"select txn_id, source_table, batch_sequence from {engine.transactions}")
    }
    rows = engine.project.rows(f"select * from `{engine.project.schema}`.`{table}`")
    return sorted(
        (
            r["id"],
            r["name"],
            r["_fivetran_start"],
            day[(r["valid_from"], table)],
            day.get((r["valid_to"], table)),
        )
        for r in rows
    )
