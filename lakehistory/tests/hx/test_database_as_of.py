"""The demo domain through both paths, day by day, and the whole database rebuilt as of many
instants (seed 003's canonical use case), checked against the generator's own batches and extracts
run through the reference model."""

from __future__ import annotations

import collections
import datetime as dt

import pytest

from harness import DEMO_CONFIG, DEMO_EXTRACTS, DbtProject
from lakehistory.landing.batch import END, ONE_MS, START, TMAX
from lakehistory_tools.generator import SourceSimulator, get_table
from lakehistory_tools.generator.batches import to_python
from oracle.fivetran import apply_stream, state_at
from oracle.replay import replay_events, replay_states

CONFIG = DEMO_CONFIG  # what the `demo` fixture (conftest.py) is built from
EXTRACTS = DEMO_EXTRACTS
HISTORY = ("meta_network", "meta_station", "obs_raw")
TABLES = ("meta_network", "meta_station", "meta_history", "meta_vars", "obs_raw")


def naive(v):
    return v.astimezone(dt.UTC).replace(tzinfo=None) if isinstance(v, dt.datetime) else v


@pytest.fixture(scope="module")
def reference() -> dict:
    """Per history-mode table its reference Fivetran table; per extract table its captures."""
    sim = SourceSimulator(CONFIG)
    batches: dict[str, list] = {t: [] for t in HISTORY}
    captures: dict[str, list] = {t: [] for t in EXTRACTS}
    for _ in sim.run():
        for t in HISTORY:
            batches[t].append(sim.batch(t)[0])
        for t in EXTRACTS:
            tdef = get_table(t)
            columns = sim.current_columns(t)
            values = [to_python(columns[c], tdef.types[c]) for c in tdef.column_names]
            rows = [dict(zip(tdef.column_names, r, strict=True)) for r in zip(*values, strict=True)]
            captures[t].append((naive(sim.sync_time(sim.sync)), rows))
    return {"history": {t: apply_stream(b) for t, b in batches.items()}, "captures": captures}


def reference_state(reference: dict, table: str, at: dt.datetime) -> dict:
    tdef = get_table(table)
    if table in reference["history"]:
        out = {}
        # Where a late version left its predecessor overlapping (rule 8), the later start wins.
        for r in sorted(state_at(reference["history"][table], at.replace(tzinfo=dt.UTC)), key=lambda r: r[START]):
            out[tuple(r[k] for k in tdef.key)] = tuple(naive(r[c]) for c in tdef.column_names)
        return out
    taken = [rows for when, rows in reference["captures"][table] if when <= at]
    return {
        tuple(r[k] for k in tdef.key): tuple(naive(r[c]) for c in tdef.column_names)
        for r in (taken[-1] if taken else [])
    }


def test_every_table_rebuilt_as_of_many_instants_equals_the_reference(demo: DbtProject, reference: dict) -> None:
    demo.spark.sql("declare or replace variable lh_test_at timestamp")
    queries = {
        t: demo.compile_inline(f"with {{{{ lakehistory.database_as_of('lh_test_at') }}}} select * from {t}")
        for t in TABLES
    }
    changes = sorted(
        {naive(r[START]) for rows in reference["history"].values() for r in rows}
        | {naive(r[END]) + ONE_MS for rows in reference["history"].values() for r in rows if r[END] < TMAX}
    )
    syncs = [when for when, _ in reference["captures"]["meta_vars"]]
    instants = sorted(set(changes[:: max(1, len(changes) // 12)] + syncs + [s - ONE_MS for s in syncs] + [changes[-1]]))
    for at in instants:
        demo.spark.sql(f"set var lh_test_at = timestamp'{at.isoformat(sep=' ')}'")
        for table in TABLES:
            tdef = get_table(table)
            rebuilt = {
                tuple(r[k] for k in tdef.key): tuple(r[c] for c in tdef.column_names) for r in demo.rows(queries[table])
            }
            assert rebuilt == reference_state(reference, table, at), f"{table} as of {at}"


def test_main_tables_are_the_current_state(demo: DbtProject, reference: dict) -> None:
    for table in TABLES:
        tdef = get_table(table)
        rows = demo.rows(f"select * from {{schema}}.{table}")
        assert {tuple(r[k] for k in tdef.key): tuple(r[c] for c in tdef.column_names) for r in rows} == reference_state(
            reference, table, dt.datetime(9999, 1, 1)
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


@pytest.mark.parametrize("table", HISTORY)
def test_events_and_feature_states_replayed_from_the_start_give_the_main_tables(demo: DbtProject, table: str) -> None:
    """The four dialects of one table agree: its events and its feature states, replayed from the
    first transaction, rebuild the main table (built from the `_hx` table); core_history counts
    the events."""
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
