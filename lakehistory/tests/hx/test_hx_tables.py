"""`_hx` history tables (seed 003) built by the Python models, on Spark through dbt.

Expected rows are written by hand from pycds's rules (one row per change, deletions carry the last
values, ids in recording order, history foreign keys to the parent row current at the child's
time) or come from the plain-Python reference model (oracle.hx) and the Fivetran reference model.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest
from history_case import SUPERSET_DATA, HistoryCase, T, batch, naive, normalize, pad, version
from hx_case import add_hx, add_main
from hypothesis import HealthCheck, Phase, given, settings

from harness import DbtProject, copy_project, examples, unique_schema
from lakehistory.landing.batch import ONE_MS, TMAX, Column
from lakehistory.names import END, START
from oracle.fivetran import apply_batch, state_at
from oracle.hx import HxOracle
from oracle.streams import batch_streams, key_columns_of

SITE = [Column("site_id", "bigint"), Column("name", "string")]
SENSOR = [Column("sensor_id", "bigint"), Column("site_id", "bigint"), Column("val", "bigint")]
READING = [
    Column("reading_id", "bigint"),
    Column("site_id", "bigint"),
    Column("sensor_id", "bigint"),
    Column("note", "string"),
]


@pytest.fixture(scope="module")
def project(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("hx")), unique_schema("hx"))
    project.landing.mkdir()
    return project


def hx_rows(project: DbtProject, name: str, id_column: str) -> list[dict]:
    return [normalize(r) for r in project.rows(f"select * from {{schema}}.`{name}` order by `{id_column}`")]


def txn_of(project: DbtProject, table: str, batch_id: str | int) -> int:
    """The transaction that applied a batch of a table."""
    batch_id = f"{batch_id:06d}" if isinstance(batch_id, int) else batch_id
    query = "select txn_id from {schema}.lakehistory_transactions where source_table = '%s' and batch_id = '%s'"
    return project.rows(query % (table, batch_id))[0]["txn_id"]


def test_pycds_invariants_over_interleaved_inserts_updates_and_deletes(project: DbtProject) -> None:
    site = HistoryCase(project, "site", SITE, ["site_id"])
    sensor = HistoryCase(project, "sensor", SENSOR, ["sensor_id"])
    reading = HistoryCase(project, "reading", READING, ["reading_id"])
    add_hx(project, "site", ["site_id"], "site")
    add_hx(project, "sensor", ["sensor_id"], "sensor", [(["site_id"], "site")])
    add_hx(project, "reading", ["reading_id"], "reading", [(["site_id"], "site"), (["sensor_id"], "sensor")])
    for t in ("site", "sensor", "reading"):
        add_main(project, t)

    def run() -> None:
        project.run_ok("run", "--select", "under_test")

    # Round 1 (alice): two sites, a sensor on site 1 and one without a site, a reading.
    site.land(
        batch(
            "site",
            SITE,
            "site_id",
            1,
            "alice",
            [version(T(1), site_id=1, name="x"), version(T(1), site_id=2, name="y")],
        )
    )
    sensor.land(
        batch(
            "sensor", SENSOR, "sensor_id", 1, "alice",
            [version(T(2), sensor_id=10, site_id=1, val=100),
             version(T(2), sensor_id=11, site_id=None, val=200)],
        )
    )  # fmt: skip
    reading.land(
        batch(
            "reading",
            READING,
            "reading_id",
            1,
            "alice",
            [version(T(3), reading_id=100, site_id=1, sensor_id=10, note="a")],
        )
    )
    run()
    after_round_1 = {t: hx_rows(project, f"{t}_hx", f"{t}_hx_id") for t in ("site", "sensor", "reading")}

    # Round 2 (bob): site 1 renamed, site 2 deleted, the sensor's value changes, the reading's note.
    site.land(batch("site", SITE, "site_id", 2, "bob", [version(T(4), site_id=1, name="x2")], deletes=[(2, T(5))]))
    sensor.land(
        batch(
            "sensor",
            SENSOR,
            "sensor_id",
            2,
            "bob",
            [version(T(6), sensor_id=10, site_id=1, val=101)],
        )
    )
    reading.land(
        batch(
            "reading",
            READING,
            "reading_id",
            2,
            "bob",
            [version(T(7), reading_id=100, site_id=1, sensor_id=10, note="b")],
        )
    )
    run()

    # Round 3 (carol): site 1 renamed again, site 2 back, sensor 10 deleted. No reading batch.
    site.land(
        batch(
            "site",
            SITE,
            "site_id",
            3,
            "carol",
            [version(T(8), site_id=1, name="x3"), version(T(10), site_id=2, name="y2")],
        )
    )
    sensor.land(batch("sensor", SENSOR, "sensor_id", 3, "carol", deletes=[(10, T(9))]))
    run()

    s1, s2, s3 = (txn_of(project, "site", n) for n in (1, 2, 3))
    e1, e2, e3 = (txn_of(project, "sensor", n) for n in (1, 2, 3))
    r1, r2 = (txn_of(project, "reading", n) for n in (1, 2))

    def site_row(i, site_id, name, t, user, deleted, txn):
        return {
            "site_id": site_id,
            "name": name,
            "mod_time": naive(t),
            "mod_user": user,
            "deleted": deleted,
            "site_hx_id": i,
            "txn_id": txn,
        }

    expected_site = [
        site_row(1, 1, "x", T(1), "alice", False, s1),
        site_row(2, 2, "y", T(1), "alice", False, s1),
        site_row(3, 1, "x2", T(4), "bob", False, s2),
        site_row(4, 2, "y", T(5) + ONE_MS, "bob", True, s2),  # the deletion carries the last values
        site_row(5, 1, "x3", T(8), "carol", False, s3),
        site_row(6, 2, "y2", T(10), "carol", False, s3),
    ]
    assert hx_rows(project, "site_hx", "site_hx_id") == expected_site

    def sensor_row(i, sensor_id, site_id, val, t, user, deleted, site_hx, txn):
        return {
            "sensor_id": sensor_id, "site_id": site_id, "val": val, "mod_time": naive(t), "mod_user": user,
            "deleted": deleted, "sensor_hx_id": i, "site_hx_id": site_hx, "txn_id": txn,
        }  # fmt: skip

    expected_sensor = [
        sensor_row(1, 10, 1, 100, T(2), "alice", False, 1, e1),
        sensor_row(2, 11, None, 200, T(2), "alice", False, None, e1),  # NULL foreign key: NULL history key, row kept
        sensor_row(3, 10, 1, 101, T(6), "bob", False, 3, e2),  # site 1 at 6:00 is x2 (site_hx 3)
        sensor_row(4, 10, 1, 101, T(9) + ONE_MS, "carol", True, 5, e3),  # deleted at 9:00; site 1 then is x3
    ]
    assert hx_rows(project, "sensor_hx", "sensor_hx_id") == expected_sensor

    def reading_row(i, note, t, user, site_hx, sensor_hx, txn):
        return {
            "reading_id": 100, "site_id": 1, "sensor_id": 10, "note": note, "mod_time": naive(t), "mod_user": user,
            "deleted": False, "reading_hx_id": i, "site_hx_id": site_hx, "sensor_hx_id": sensor_hx, "txn_id": txn,
        }  # fmt: skip

    expected_reading = [reading_row(1, "a", T(3), "alice", 1, 1, r1), reading_row(2, "b", T(7), "bob", 3, 3, r2)]
    assert hx_rows(project, "reading_hx", "reading_hx_id") == expected_reading

    # Append-only: what round 1 recorded is unchanged, ids included.
    for t, rows in after_round_1.items():
        assert hx_rows(project, f"{t}_hx", f"{t}_hx_id")[: len(rows)] == rows

    # Main tables: the current rows with mod_time and mod_user of their latest change.
    assert sorted(project.rows("select * from {schema}.site_main"), key=lambda r: r["site_id"]) == [
        {"site_id": 1, "name": "x3", "mod_time": naive(T(8)), "mod_user": "carol"},
        {"site_id": 2, "name": "y2", "mod_time": naive(T(10)), "mod_user": "carol"},
    ]
    assert project.rows("select * from {schema}.sensor_main") == [
        {"sensor_id": 11, "site_id": None, "val": 200, "mod_time": naive(T(2)), "mod_user": "alice"}
    ]

    # Round 4 (dave): a late version of site 1 at 5:30, between x2 (4:00) and x3 (8:00), re-sending x3.
    site.land(
        batch(
            "site", SITE, "site_id", 4, "dave",
            [version(T(5.5), T(8) - ONE_MS, site_id=1, name="x-late"), version(T(8), site_id=1, name="x3")],
        )
    )  # fmt: skip
    run()
    s4 = txn_of(project, "site", 4)
    # One row with an early mod_time and the next id; re-sent x3 appends nothing.
    assert hx_rows(project, "site_hx", "site_hx_id") == [
        *expected_site,
        site_row(7, 1, "x-late", T(5.5), "dave", False, s4),
    ]
    # The sensor's history keys stay as recorded...
    assert hx_rows(project, "sensor_hx", "sensor_hx_id") == expected_sensor
    # ...and hx_resolved gives the valid-time-correct parent as known now: at 6:00 that is x-late.
    resolved = project.rows(
        "select sensor_hx_id, site_hx_id, site_hx_id_valid from "
        + project.compile_inline("{{ lakehistory.hx_resolved(ref('sensor_hx')) }}")
        + " as r order by sensor_hx_id"
    )
    assert resolved == [
        {"sensor_hx_id": 1, "site_hx_id": 1, "site_hx_id_valid": 1},
        {"sensor_hx_id": 2, "site_hx_id": None, "site_hx_id_valid": None},
        {"sensor_hx_id": 3, "site_hx_id": 3, "site_hx_id_valid": 7},
        {"sensor_hx_id": 4, "site_hx_id": 5, "site_hx_id_valid": 5},
    ]
    # Running again with nothing new appends nothing.
    run()
    assert len(hx_rows(project, "site_hx", "site_hx_id")) == 7
    assert hx_rows(project, "sensor_hx", "sensor_hx_id") == expected_sensor


# --- random change streams against the reference models ---------------------------------------------


def _at_param(project: DbtProject, model: str) -> str:
    """`hx_as_of(model, at)` compiled once, `at` a session variable the test sets per instant."""
    project.spark.sql("declare or replace variable lh_test_at timestamp")
    return project.compile_inline(f"select * from {{{{ lakehistory.hx_as_of(ref('{model}'), 'lh_test_at') }}}} as h")


def _latest_start_state(table, instant: dt.datetime, key, data) -> dict:
    """Rule 18's state at an instant; where a late version left its predecessor overlapping
    (rule 8), the later start wins."""
    out: dict = {}
    for r in sorted(state_at(table, instant), key=lambda r: r[START]):
        out[tuple(r[k] for k in key)] = tuple(normalize_value(r.get(c)) for c in data)
    return out


def normalize_value(v):
    return naive(v) if isinstance(v, dt.datetime) else v


@pytest.mark.parametrize("composite", [False, True], ids=["single_key", "composite_key"])
def test_random_streams_match_the_hx_reference_and_rebuild_every_instant(project: DbtProject, composite: bool) -> None:
    counter = iter(range(1000))

    @settings(
        max_examples=examples(1, 3),
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # each step is a dbt run: report, don't shrink
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(stream=batch_streams(max_batches=3, max_keys=3, max_events=3, composite_key=composite, deleted_mode="none"))
    def check(stream) -> None:
        columns, key, batches = stream
        table_columns = key_columns_of(columns, key) + SUPERSET_DATA  # every data column a stream may draw
        data = [c.name for c in table_columns if c.name not in key]
        name = f"hxs_{'c' if composite else 's'}_{next(counter)}"
        case = HistoryCase(project, name, table_columns, key)
        add_hx(project, name, key, name)
        oracle = HxOracle(key, data)
        reference: list = []
        for i, b in enumerate(batches):
            padded = dataclasses.replace(pad(b, table_columns), author=f"user{i}")
            case.land(padded)
            project.run_ok("run", "--select", name, f"{name}_hx")
            reference = apply_batch(reference, padded)
            oracle.record(reference, txn_of(project, name, b.batch_id), padded.author)
            actual = [
                {**{k: v for k, v in r.items() if k != f"{name}_hx_id"}, "id": r[f"{name}_hx_id"]}
                for r in hx_rows(project, f"{name}_hx", f"{name}_hx_id")
            ]
            expected = [{k: normalize_value(v) for k, v in r.items()} for r in oracle.table()]
            assert actual == expected, f"after batch {b.batch_id}"
        # The _hx reading equals the reference state at every instant where something changes.
        query = _at_param(project, f"{name}_hx")
        ends = [r[END] for r in reference if r[END] < TMAX]
        instants = sorted(
            {r[START] for r in reference}
            | {r[START] - ONE_MS for r in reference}
            | set(ends)
            | {e + ONE_MS for e in ends}
        )
        for t in instants:
            project.spark.sql(f"set var lh_test_at = timestamp'{naive(t).isoformat(sep=' ')}'")
            rebuilt = {tuple(r[k] for k in key): tuple(r[c] for c in data) for r in project.rows(query)}
            assert rebuilt == _latest_start_state(reference, t, key, data), f"state at {t}"

    check()


# --- the snapshot path: daily full extracts captured by a dbt snapshot -----------------------------

GAUGE_HEADER = ["gauge_id", "label", "level", "extracted_at", "extracted_by"]


def land_extract(project: DbtProject, day: str, by: str, rows: list[tuple]) -> None:
    folder = project.landing / "extracts" / "gauge"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [",".join(GAUGE_HEADER)] + [
        ",".join(["" if v is None else str(v) for v in r] + [f"{day}T03:00:00.000Z", by]) for r in rows
    ]
    (folder / f"{day}.csv").write_text("\n".join(lines) + "\n")


def snapshot_project(project: DbtProject) -> None:
    folder = project.project_dir / "models" / "under_test"
    folder.mkdir(parents=True, exist_ok=True)
    source = {
        "version": 2,
        "sources": [
            {
                "name": "test_extracts",
                "meta": {"lakehistory": {"landing_root": "{{ env_var('LAKEHISTORY_LANDING') }}"}},
                "tables": [
                    {
                        "name": "gauge",
                        "meta": {"lakehistory": {"key": ["gauge_id"]}},
                        "columns": [
                            {"name": "gauge_id", "data_type": "bigint"},
                            {"name": "label", "data_type": "string"},
                            {"name": "level", "data_type": "double"},
                        ],
                    }
                ],
            }
        ],
    }
    (folder / "_test_extracts__sources.yml").write_text(json.dumps(source, indent=2))
    (folder / "stg_gauge.sql").write_text(
        "{{ config(materialized='ephemeral') }}\n"
        "select * from {{ lakehistory.landing_extract('test_extracts', 'gauge', 'gauge_snapshot') }}\n"
    )
    snapshots = project.project_dir / "snapshots" / "under_test"
    snapshots.mkdir(parents=True, exist_ok=True)
    snapshot = {
        "name": "gauge_snapshot",
        "relation": "ref('stg_gauge')",
        "config": {
            "unique_key": "gauge_id",
            "strategy": "check",
            "check_cols": ["gauge_id", "label", "level"],
            "updated_at": "extracted_at",
            "hard_deletes": "new_record",
            "meta": {"lakehistory": {"extract": True}},
            "post_hook": "{{ lakehistory.record_capture('gauge') }}",
        },
    }
    (snapshots / "gauge_snapshot.yml").write_text(json.dumps({"version": 2, "snapshots": [snapshot]}, indent=2))
    add_hx(project, "gauge", ["gauge_id"], "gauge_snapshot")
    add_main(project, "gauge")
    # every dialect from the snapshot, as from a history table
    append = "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    (folder / "gauge_events.sql").write_text(append + "{{ lakehistory.event_history(ref('gauge_snapshot')) }}\n")
    (folder / "gauge_states.sql").write_text(append + "{{ lakehistory.feature_states(ref('gauge_snapshot')) }}\n")
    (folder / "gauge_core.sql").write_text(append + "{{ lakehistory.core_history({'gauge': ref('gauge_events')}) }}\n")


@pytest.fixture
def gauges(lakehouse: Path, tmp_path: Path) -> DbtProject:
    project = DbtProject(copy_project(tmp_path / "project"), unique_schema("gauges"))
    project.landing.mkdir()
    snapshot_project(project)
    return project


def build_gauges(project: DbtProject) -> None:
    project.run_ok(
        "build", "--select", "gauge_snapshot", "gauge_hx", "gauge_main", "gauge_events", "gauge_states", "gauge_core"
    )


def test_snapshot_path_records_deletes_re_adds_and_nothing_twice(gauges: DbtProject) -> None:
    land_extract(gauges, "2024-06-01", "dump-a", [(1, "one", 1.0), (2, "two", 2.0)])
    land_extract(gauges, "2024-06-02", "dump-b", [(1, "one", 1.5)])  # 2 deleted, 1 changed
    land_extract(gauges, "2024-06-03", "dump-c", [(1, "one", 1.5), (2, "two again", 2.0)])  # 2 re-added
    for _ in range(3):  # one extract per run, oldest first
        build_gauges(gauges)

    def d(day: int) -> dt.datetime:
        return dt.datetime(2024, 6, day, 3)

    txns = gauges.rows(
        "select txn_id, operation, source_table, batch_id, author, versions_opened, versions_closed"
        " from {schema}.lakehistory_transactions order by txn_id"
    )
    snapshot_rows = gauges.rows(
        "select gauge_id, label, dbt_valid_from, dbt_valid_to, dbt_is_deleted"
        " from {schema}.gauge_snapshot where gauge_id = 2 order by dbt_valid_from"
    )
    assert [(r["label"], r["dbt_valid_from"], r["dbt_valid_to"], r["dbt_is_deleted"]) for r in snapshot_rows] == [
        ("two", d(1), d(2), "False"),
        ("two", d(2), d(3), "True"),
        ("two again", d(3), None, "False"),
    ]
    assert [(t["operation"], t["source_table"], t["batch_id"], t["author"]) for t in txns] == [
        ("snapshot", "gauge", "2024-06-01", "dump-a"),
        ("snapshot", "gauge", "2024-06-02", "dump-b"),
        ("snapshot", "gauge", "2024-06-03", "dump-c"),
    ]
    assert [(t["versions_opened"], t["versions_closed"]) for t in txns] == [(2, 0), (2, 2), (1, 1)]

    def row(i, gauge_id, label, level, day, by, deleted, txn):
        return {
            "gauge_id": gauge_id, "label": label, "level": level, "mod_time": d(day), "mod_user": by,
            "deleted": deleted, "gauge_hx_id": i, "txn_id": txn,
        }  # fmt: skip

    t1, t2, t3 = (t["txn_id"] for t in txns)
    expected = [
        row(1, 1, "one", 1.0, 1, "dump-a", False, t1),
        row(2, 2, "two", 2.0, 1, "dump-a", False, t1),
        row(3, 1, "one", 1.5, 2, "dump-b", False, t2),
        row(4, 2, "two", 2.0, 2, "dump-b", True, t2),  # gone from the extract: deleted, last values
        row(5, 2, "two again", 2.0, 3, "dump-c", False, t3),  # back: a new version
    ]
    assert hx_rows(gauges, "gauge_hx", "gauge_hx_id") == expected
    assert sorted(
        (r["gauge_id"], r["label"], r["mod_time"], r["mod_user"])
        for r in gauges.rows("select * from {schema}.gauge_main")
    ) == [
        (1, "one", d(2), "dump-b"),
        (2, "two again", d(3), "dump-c"),
    ]

    # The same captures in ESQL's events and _core.history, and as Naksha's feature states.
    events = gauges.rows(
        "select _hist_trans_id, gauge_id, _hist_event, label, level, _hist_user, _hist_valid_time"
        " from {schema}.gauge_events order by _hist_trans_id, gauge_id, _hist_event"
    )
    assert [tuple(e.values()) for e in events] == [
        (t1, 1, 1, "one", 1.0, "dump-a", d(1)),
        (t1, 2, 1, "two", 2.0, "dump-a", d(1)),
        (t2, 1, 3, "one", 1.0, "dump-b", d(2)),
        (t2, 1, 4, "one", 1.5, "dump-b", d(2)),
        (t2, 2, 2, "two", 2.0, "dump-b", d(2)),
        (t3, 2, 1, "two again", 2.0, "dump-c", d(3)),
    ]
    changed = gauges.compile_inline(
        "select txn_id, gauge_id, column_name, old_value, new_value"
        " from {{ lakehistory.column_changes(ref('gauge_events')) }} where action = 'update'"
    )
    assert [tuple(r.values()) for r in gauges.rows(changed)] == [(t2, 1, "level", "1.0", "1.5")]
    core = gauges.rows("select trans_id, table_name, event_name, rows_changed from {schema}.gauge_core")
    assert sorted(tuple(r.values()) for r in core) == [
        (t1, "gauge", "insert", 2),
        (t2, "gauge", "delete", 1),
        (t2, "gauge", "update_from", 1),
        (t2, "gauge", "update_to", 1),
        (t3, "gauge", "insert", 1),
    ]
    states = gauges.rows(
        "select gauge_id, version, action, txn_id, label, author, deleted, puuid is null as first,"
        " valid_updated_at from {schema}.gauge_states order by gauge_id, version"
    )
    assert [tuple(r.values()) for r in states] == [
        (1, 1, "CREATE", t1, "one", "dump-a", False, True, d(1)),
        (1, 2, "UPDATE", t2, "one", "dump-b", False, False, d(2)),
        (2, 1, "CREATE", t1, "two", "dump-a", False, True, d(1)),
        (2, 2, "DELETE", t2, "two", "dump-b", True, False, d(2)),
        (2, 3, "CREATE", t3, "two again", "dump-c", False, True, d(3)),
    ]

    # Capturing the same extract again adds nothing: no snapshot row, no transaction, no _hx row.
    count = gauges.rows("select count(*) as n from {schema}.gauge_snapshot")[0]["n"]
    build_gauges(gauges)
    assert gauges.rows("select count(*) as n from {schema}.gauge_snapshot")[0]["n"] == count
    assert len(gauges.rows("select * from {schema}.lakehistory_transactions")) == 3
    assert hx_rows(gauges, "gauge_hx", "gauge_hx_id") == expected
    assert len(gauges.rows("select * from {schema}.gauge_events")) == len(events)


def test_a_bad_extract_stops_the_snapshot_and_changes_nothing(gauges: DbtProject) -> None:
    land_extract(gauges, "2024-06-01", "dump-a", [(1, "one", 1.0)])
    build_gauges(gauges)
    before = gauges.rows("select * from {schema}.gauge_snapshot")
    land_extract(gauges, "2024-06-02", "dump-b", [(1, "one", 1.0), (2, "two", "high")])
    message = gauges.run_fails("build", "--select", "gauge_snapshot", "gauge_hx")
    assert "Extract gauge/2024-06-02.csv: data row 2: column level: double expected" in message
    assert gauges.rows("select * from {schema}.gauge_snapshot") == before
    assert len(gauges.rows("select * from {schema}.lakehistory_transactions")) == 1


def test_a_source_column_that_clashes_with_the_hx_columns_stops_the_model(project: DbtProject) -> None:
    """`deleted` and `mod_user` are the _hx table's own: a source column of that name (a pycds
    table's own `mod_user`, say) is refused, naming it, never dropped or taken over."""
    columns = [Column("tag_id", "bigint"), Column("deleted", "boolean"), Column("mod_user", "string")]
    tag = HistoryCase(project, "tag", columns, ["tag_id"])
    add_hx(project, "tag", ["tag_id"], "tag")
    tag.land(batch("tag", columns, "tag_id", 1, "alice", [version(T(1), tag_id=1, deleted=False, mod_user="m")]))
    message = project.run_fails("run", "--select", "tag", "tag_hx")
    assert "tag_hx: columns deleted, mod_user have a name lakehistory gives a column of its own" in message


def test_a_transaction_that_moved_no_row_is_not_pending_for_an_hx_table(project: DbtProject) -> None:
    """A sync that brought nothing new for a table leaves a transaction that opened, closed and
    purged no row. It has nothing an `_hx` table records, so it is not pending: an `_hx` build
    after it reads nothing of its source."""
    spark = project.spark
    from lakehistory.hx.sources import Source  # its module needs the running session

    # (txn_id, versions_opened, versions_closed, rows_purged)
    counts = [(1, 2, 0, 0), (2, 0, 0, 0), (3, 0, 1, 0), (4, 0, 0, 3), (5, 0, 0, 0)]
    transactions = spark.createDataFrame(
        [(i, "batch", f"{project.schema}.site", f"{i:06d}", "alice", T(i), o, c, p) for i, o, c, p in counts],
        "txn_id bigint, operation string, history_table string, batch_id string, author string,"
        " started_at timestamp, versions_opened bigint, versions_closed bigint, rows_purged bigint",
    )
    source = Source(spark.range(0), None, "site")  # `recorded` reads only the transactions
    assert [r.txn_id for r in source.recorded(transactions, ("batch",), 0)] == [1, 3, 4]
    assert [r.txn_id for r in source.recorded(transactions, ("batch",), 3)] == [4]
