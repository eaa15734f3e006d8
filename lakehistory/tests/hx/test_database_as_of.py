"""The demo domain through both paths, day by day, and the whole database rebuilt as of many
instants (seed 003's canonical use case), also as a past download pinned to its transaction,
checked against the generator's own batches and extracts run through the reference model."""

from __future__ import annotations

import collections
import datetime as dt

import pytest
from demo_reference import TABLES, compile_many, instants, known_after, state

from harness import DbtProject
from lakehistory_tools.generator import get_table
from oracle.replay import replay_events, replay_states


def test_every_table_rebuilt_as_of_many_instants_equals_the_reference(demo: DbtProject) -> None:
    assert_database_as_of(demo, known_after(), instants(known_after()))


def assert_database_as_of(demo: DbtProject, reference: dict, at: list[dt.datetime], txn: int | None = None) -> None:
    """Every table of `database_as_of(t, txn=txn)` equals the reference's state at each instant of `at`."""
    pin = f", txn={txn}" if txn is not None else ""
    queries = compile_many(
        demo, {t: f"with {{{{ lakehistory.database_as_of('lh_test_at'{pin}) }}}} select * from {t}" for t in TABLES}
    )
    demo.spark.sql("declare or replace variable lh_test_at timestamp")
    for instant in at:
        demo.spark.sql(f"set var lh_test_at = timestamp'{instant.isoformat(sep=' ')}'")
        for table in TABLES:
            tdef = get_table(table)
            rebuilt = {
                tuple(r[k] for k in tdef.key): tuple(r[c] for c in tdef.column_names) for r in demo.rows(queries[table])
            }
            assert rebuilt == state(reference, table, instant), f"{table} as of {instant}{pin}"


def test_a_download_pinned_to_a_transaction_is_reproduced_after_later_batches(demo: DbtProject) -> None:
    """Seed 003's "reproduce a past download exactly": with `txn=` the last transaction of the first
    day, `database_as_of` gives, at every instant, what a download made after the first day's
    build gave, though the second day's batches and extracts changed the history since."""
    txns = demo.rows("select * from {schema}.lakehistory_transactions order by txn_id")
    first_day = min(t["batch_id"] for t in txns if t["operation"] == "snapshot")
    day_one = sorted({t["txn_id"] for t in txns if t["batch_sequence"] == 1 or t["batch_id"] == first_day})
    ids = sorted({t["txn_id"] for t in txns})  # a sync has a row per table
    assert day_one == ids[: len(day_one)] and len(day_one) < len(ids), "day one's transactions come first"
    then, now = known_after(1), known_after()
    at = instants(now)
    assert any(state(then, t, i) != state(now, t, i) for t in TABLES for i in at), "the second day changes the answer"
    assert_database_as_of(demo, then, at, txn=day_one[-1])


def test_main_tables_are_the_current_state(demo: DbtProject) -> None:
    for table in TABLES:
        tdef = get_table(table)
        rows = demo.rows(f"select * from {{schema}}.{table}")
        assert {tuple(r[k] for k in tdef.key): tuple(r[c] for c in tdef.column_names) for r in rows} == state(
            known_after(), table, dt.datetime(9999, 1, 1)
        ), table
        assert all(r["mod_time"] is not None and r["mod_user"] for r in rows), table


@pytest.mark.parametrize(
    ("child", "parent", "column"),
    [
        ("meta_station", "meta_network", "network_id"),
        ("meta_history", "meta_station", "station_id"),
        ("meta_vars", "meta_network", "network_id"),
        ("obs_raw", "meta_history", "history_id"),
        ("obs_raw", "meta_vars", "vars_id"),
    ],
)
def test_history_foreign_keys_point_to_the_parent_current_at_the_childs_time(
    demo: DbtProject, child: str, parent: str, column: str
) -> None:
    """Across both paths: the same key; the parent row current at the child's mod_time, or the
    parent's first row when the parent was first seen later (a parent captured by a daily
    extract after the child's change); and hx_resolved agrees unless a parent row arrived later."""
    resolved = demo.compile_inline(f"{{{{ lakehistory.hx_resolved(ref('{child}_hx')) }}}}")
    pairs = demo.rows(
        f"""
        select c.{column} as child_key, c.mod_time as child_time, c.txn_id as child_txn,
               c.{parent}_hx_id as stored, c.{parent}_hx_id_valid as valid,
               p.{column} as parent_key, p.mod_time as parent_time,
               (select min(f.mod_time) from {{schema}}.{parent}_hx as f where f.{column} = c.{column}) as first_time,
               (select count(*) from {{schema}}.{parent}_hx as l
                 where l.{column} = c.{column} and l.txn_id > c.txn_id and l.mod_time <= c.mod_time) as later_parents
        from {resolved} as c
        left join {{schema}}.{parent}_hx as p on p.{parent}_hx_id = c.{parent}_hx_id
        """
    )
    assert pairs, f"{child} has rows"
    for p in pairs:
        if p["child_key"] is None:
            assert p["stored"] is None
            continue
        assert p["parent_key"] == p["child_key"], p
        assert p["parent_time"] <= p["child_time"] or p["parent_time"] == p["first_time"], p
        if p["later_parents"] == 0:
            assert p["valid"] == p["stored"], p


@pytest.mark.parametrize("table", TABLES)
def test_events_and_feature_states_replayed_from_the_start_give_the_main_tables(demo: DbtProject, table: str) -> None:
    """The four dialects of one table agree, for the tables landed as batches and those captured
    from daily extracts alike: its events and its feature states, replayed from the first
    transaction, rebuild the main table (built from the `_hx` table); core_history counts the
    events."""
    tdef = get_table(table)
    key, columns = list(tdef.key), list(tdef.column_names)
    main = {
        tuple(r[k] for k in key): tuple(r[c] for c in columns) for r in demo.rows(f"select * from {{schema}}.{table}")
    }
    events = demo.rows(f"select * from {{schema}}.{table}_events")
    states = demo.rows(f"select * from {{schema}}.{table}_states")
    last = demo.rows("select max(txn_id) as v from {schema}.lakehistory_transactions")[0]["v"]
    assert replay_events(events, key, columns, last) == main
    assert replay_states(states, key, columns, last) == main
    counted = demo.rows(
        f"select event, sum(rows_changed) as n from {{schema}}.core_history where table_name = '{table}' group by event"
    )
    assert {r["event"]: r["n"] for r in counted} == dict(collections.Counter(e["_hist_event"] for e in events))


def test_core_history_lists_every_table_each_transaction_touched(demo: DbtProject) -> None:
    """ESQL's `_core.history`: for every transaction, every table it changed (a batch, a capture of
    an extract), as the transactions table records them."""
    touched = demo.rows(
        "select distinct txn_id, source_table from {schema}.lakehistory_transactions"
        " where versions_opened > 0 or versions_closed > 0"
    )
    listed = demo.rows("select distinct trans_id, table_name from {schema}.core_history")
    assert {(r["trans_id"], r["table_name"]) for r in listed} == {(r["txn_id"], r["source_table"]) for r in touched}
    assert {r["source_table"] for r in touched} == set(TABLES)


def test_an_undo_of_a_sync_that_captured_extracts_is_refused_naming_them(demo: DbtProject) -> None:
    """An undo cannot take back a capture of a daily extract: undoing the sync's batches alone
    would leave it half undone, so the undo is refused, naming the captures and the way on, and
    nothing changes."""
    captures = demo.rows(
        "select txn_id, collect_list(history_table) as tables from {schema}.lakehistory_transactions"
        " where sync_id is not null and operation = 'snapshot' and (versions_opened > 0 or versions_closed > 0)"
        " group by txn_id order by txn_id"
    )
    assert captures, "the demo's syncs capture extracts"
    before = demo.rows("select count(*) as n from {schema}.lakehistory_transactions")[0]["n"]
    message = demo.run_fails("run-operation", "lakehistory.undo", "--args", f"{{txn_id: {captures[-1]['txn_id']}}}")
    assert "keep_captures: true" in message, message
    assert all(table in message for table in captures[-1]["tables"]), message
    assert demo.rows("select count(*) as n from {schema}.lakehistory_transactions")[0]["n"] == before
