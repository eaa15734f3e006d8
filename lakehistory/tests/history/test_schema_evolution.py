"""Schema evolution end to end (spec rule 17): a column a batch adds, and one it drops, reach the
`_hx` table (no rebuild, ids kept), the event history, the feature states and the main table; a
column whose declared type changes is refused, naming it, with every table left as it was."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from history_case import HistoryCase, T, batch, naive, normalize, version
from hx_case import add_derived

from harness import DbtProject, copy_project, unique_schema
from lakehistory.landing.batch import Column, SchemaChange
from oracle.replay import UPDATE_FROM, UPDATE_TO

GAUGE = [Column("gauge_id", "bigint"), Column("label", "string"), Column("level", "double")]
WITH_UNIT = [*GAUGE, Column("unit", "string")]
KEY = ["gauge_id"]


@pytest.fixture(scope="module")
def case(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> HistoryCase:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("evolution")), unique_schema("evolution"))
    project.landing.mkdir()
    case = HistoryCase(project, "gauge", GAUGE, KEY)
    add_derived(project, "gauge", KEY)
    return case


def rows(case: HistoryCase, table: str, order: str) -> list[dict]:
    return [normalize(r) for r in case.project.rows(f"select * from {{schema}}.`{table}` order by {order}")]


def columns(case: HistoryCase, table: str) -> list[str]:
    return case.project.spark.table(f"`{case.project.schema}`.`{table}`").columns


def test_added_and_dropped_columns_reach_hx_events_states_and_the_main_table(case: HistoryCase) -> None:
    g = version
    case.land(batch("gauge", GAUGE, "gauge_id", 1, "alice", [g(T(1), gauge_id=1, label="a", level=1.0)]))
    case.land(batch("gauge", GAUGE, "gauge_id", 2, "alice", [g(T(1), gauge_id=2, label="b", level=2.0)]))
    case.project.run_ok("run", "--select", "gauge+")
    hx_before = rows(case, "gauge_hx", "gauge_hx_id")
    assert [r["gauge_hx_id"] for r in hx_before] == [1, 2]

    # At T(2) the source adds `unit` (default 'm') and drops `label`; gauge 1 then changes at T(3).
    changes = [
        SchemaChange("add_column", "unit", T(2), type="string", default="m"),
        SchemaChange("drop_column", "label", T(2)),
    ]
    later = g(T(3), gauge_id=1, label=None, level=3.0, unit="cm")
    case.land(dataclasses.replace(batch("gauge", WITH_UNIT, "gauge_id", 3, "bob", [later]), schema_changes=changes))
    case.project.run_ok("run", "--select", "gauge+")
    txn = case.transactions()[-1]["txn_id"]

    # _hx: the rows recorded before are untouched, with `unit` NULL; the new ones follow their ids.
    hx = rows(case, "gauge_hx", "gauge_hx_id")
    assert hx[:2] == [{**r, "unit": None} for r in hx_before]
    assert [(r["gauge_hx_id"], r["gauge_id"], r["label"], r["level"], r["unit"], r["mod_time"]) for r in hx[2:]] == [
        (3, 1, None, 1.0, "m", naive(T(2))),
        (4, 2, None, 2.0, "m", naive(T(2))),
        (5, 1, None, 3.0, "cm", naive(T(3))),
    ]
    assert {r["txn_id"] for r in hx[2:]} == {txn}

    # Events and states carry the new column from this transaction on (NULL before it).
    events = rows(case, "gauge_events", "_hist_trans_id, gauge_id, _hist_valid_time, _hist_event")
    assert "unit" in columns(case, "gauge_events")
    assert [
        (e["gauge_id"], e["_hist_valid_time"], e["_hist_event"], e["label"], e["level"], e["unit"])
        for e in events
        if e["_hist_trans_id"] == txn
    ] == [
        (1, naive(T(2)), UPDATE_FROM, "a", 1.0, None),  # the copy at T(2), one event per version
        (1, naive(T(2)), UPDATE_TO, None, 1.0, "m"),
        (1, naive(T(3)), UPDATE_FROM, None, 1.0, "m"),
        (1, naive(T(3)), UPDATE_TO, None, 3.0, "cm"),
        (2, naive(T(2)), UPDATE_FROM, "b", 2.0, None),
        (2, naive(T(2)), UPDATE_TO, None, 2.0, "m"),
    ]
    assert all(e["unit"] is None for e in events if e["_hist_trans_id"] < txn)
    states = rows(case, "gauge_states", "txn_id, gauge_id")
    assert "unit" in columns(case, "gauge_states")
    assert [
        (s["gauge_id"], s["action"], s["version"], s["label"], s["unit"]) for s in states if s["txn_id"] == txn
    ] == [
        (1, "UPDATE", 2, None, "cm"),
        (2, "UPDATE", 2, None, "m"),
    ]

    # The main table: the current rows with the new column; the dropped one stays, NULL.
    main = rows(case, "gauge_main", "gauge_id")
    assert [(r["gauge_id"], r["label"], r["level"], r["unit"]) for r in main] == [
        (1, None, 3.0, "cm"),
        (2, None, 2.0, "m"),
    ]

    # The next batch, with the column declared by the source now, builds on all of them as usual.
    case = dataclasses.replace(case, columns=WITH_UNIT)
    case.land(
        batch("gauge", WITH_UNIT, "gauge_id", 4, "carol", [g(T(4), gauge_id=2, label=None, level=2.0, unit="km")])
    )
    case.project.run_ok("run", "--select", "gauge+")
    assert [(r["gauge_hx_id"], r["unit"]) for r in rows(case, "gauge_hx", "gauge_hx_id")][5:] == [(6, "km")]
    assert rows(case, "gauge_main", "gauge_id")[1]["unit"] == "km"


def test_a_changed_column_type_is_refused_naming_the_column(case: HistoryCase) -> None:
    """The source declares `level` as a string once the table holds doubles: the run stops with an
    error naming the column, what the table holds and what the source declares, and no table changes."""
    meter = HistoryCase(case.project, "meter", GAUGE, KEY)
    meter.land(batch("meter", GAUGE, "gauge_id", 1, "alice", [version(T(1), gauge_id=1, label="a", level=1.0)]))
    meter.run()
    before = meter.physical_rows()
    sources = case.project.project_dir / "models" / "under_test" / "_test_landing__sources.yml"
    declared = json.loads(sources.read_text())
    (table,) = [t for t in declared["sources"][0]["tables"] if t["name"] == "meter"]
    table["columns"] = [{"name": c.name, "data_type": "string" if c.name == "level" else c.type} for c in GAUGE]
    sources.write_text(json.dumps(declared))
    retyped = [Column("gauge_id", "bigint"), Column("label", "string"), Column("level", "string")]
    meter.land(batch("meter", retyped, "gauge_id", 2, "bob", [version(T(2), gauge_id=1, label="b", level="x")]))
    error = meter.run_fails()
    assert "level" in error and "double" in error and "string" in error, error
    assert meter.physical_rows() == before
    assert len(meter.transactions()) == 1
