"""Retention (`lakehistory.cleanup` over a whole project): the history table, its event history,
feature states and `_hx` table, and two `_hx` tables below it in a history-foreign-key chain
(site <- sensor <- reading), cleaned at one cutoff.

Which rows go is written out by hand; that nothing else changes is checked by reading every table
as of every transaction from the cutoff on, before and after, with the plain-Python readings
(the `_hx` rule of docs/hx-tables.md, oracle.replay for events and states). On the demo (a copy of
its tables, every model of the project cleaned in one run) the same readings are SQL, compared
with the demo's own tables; its two days bring few corrections, so the hand-written case is where
superseded `_hx` rows and held-back parents are exercised."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from history_case import HistoryCase, T, batch, version
from hx_case import add_derived, add_hx

from harness import DbtProject, copy_project, stored_tables, unique_schema
from lakehistory.landing.batch import Column
from oracle.replay import replay_events, replay_states

SITE = [Column("site_id", "bigint"), Column("name", "string")]
SENSOR = [Column("sensor_id", "bigint"), Column("site_id", "bigint"), Column("val", "bigint")]
READING = [Column("reading_id", "bigint"), Column("sensor_id", "bigint"), Column("note", "string")]
HX = {"site": "site_hx_id", "sensor": "sensor_hx_id", "reading": "reading_hx_id"}
KEYS = {"site": "site_id", "sensor": "sensor_id", "reading": "reading_id"}


@pytest.fixture(scope="module")
def project(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("retention")), unique_schema("retention"))
    project.landing.mkdir()
    return project


def rows(project: DbtProject, name: str) -> list[dict]:
    return project.rows(f"select * from {{schema}}.`{name}`")


def hx_readings(hx_rows: list[dict], table: str, txns: list[int]) -> dict:
    """Per (key, time, transaction): the id of the row the `_hx` table reads as of then, at every
    mod_time the table holds: the greatest (mod_time, id) at or before it, recorded by then."""
    key, hx_id = KEYS[table], HX[table]
    times = sorted({r["mod_time"] for r in hx_rows})
    readings = {}
    for k in {r[key] for r in hx_rows}:
        for t in times:
            for v in txns:
                known = [r for r in hx_rows if r[key] == k and r["mod_time"] <= t and r["txn_id"] <= v]
                if known:
                    readings[(k, t, v)] = max(known, key=lambda r: (r["mod_time"], r[hx_id]))[hx_id]
    return readings


def cleanup(project: DbtProject, **args) -> None:
    project.run_ok("run-operation", "lakehistory.cleanup", "--args", json.dumps(args))


def test_cleanup_keeps_every_answer_from_the_cutoff_on_and_every_history_foreign_key(project: DbtProject) -> None:
    site = HistoryCase(project, "site", SITE, ["site_id"])
    sensor = HistoryCase(project, "sensor", SENSOR, ["sensor_id"])
    reading = HistoryCase(project, "reading", READING, ["reading_id"])
    add_derived(project, "site", ["site_id"])
    add_hx(project, "sensor", ["sensor_id"], "sensor", [(["site_id"], "site")])
    add_hx(project, "reading", ["reading_id"], "reading", [(["sensor_id"], "sensor")])

    def build() -> None:
        project.run_ok("run", "--select", "under_test")

    def sites_and_sensors(n: int, author: str, names: tuple[str, str], values: tuple[int, int]) -> None:
        """Sites 1 and 2 from T(1), sensors 10 (on site 1) and 11 (on site 2) from T(2)."""
        sites = [version(T(1), site_id=i, name=name) for i, name in zip((1, 2), names, strict=True)]
        sensors = [version(T(2), sensor_id=10 + i, site_id=1 + i, val=val) for i, val in enumerate(values)]
        site.land(batch("site", SITE, "site_id", n, author, sites))
        sensor.land(batch("sensor", SENSOR, "sensor_id", n, author, sensors))

    # Round 1: two sites, a sensor on each, a reading of sensor 10.
    sites_and_sensors(1, "ann", ("a", "b"), (100, 110))
    reading.land(
        batch("reading", READING, "reading_id", 1, "ann", [version(T(3), reading_id=100, sensor_id=10, note="n")])
    )
    build()
    # Round 2: both sites and both sensors corrected (the same start, other values).
    sites_and_sensors(2, "bo", ("A", "B"), (101, 111))
    build()
    cutoff = max(t["txn_id"] for t in site.transactions() + sensor.transactions())
    # Round 3, after the cutoff: site 1 and sensor 10 change again.
    site.land(batch("site", SITE, "site_id", 3, "cy", [version(T(4), site_id=1, name="A2")]))
    sensor.land(batch("sensor", SENSOR, "sensor_id", 3, "cy", [version(T(5), sensor_id=10, site_id=1, val=102)]))
    build()

    names = ["site_hx", "sensor_hx", "reading_hx", "site_events", "site_states"]
    before = {name: rows(project, name) for name in names}
    txns = sorted({r["txn_id"] for r in before["site_hx"] + before["sensor_hx"] + before["reading_hx"]})
    later = [v for v in txns if v >= cutoff]
    assert len(later) >= 3, "transactions after the cutoff to read as of"

    # The event history alone first: its retention is a transaction of the writer, recorded, and
    # a tag of a transaction before it, whose events it removed, is refused.
    cleanup(project, model="site_events", before_version=cutoff)
    log = "select history_table, app_id, rows_purged from {schema}.lakehistory_transactions where operation = 'cleanup'"
    (retention,) = project.rows(log)
    assert (retention["app_id"], retention["rows_purged"]) == ("lakehistory.retention", 2)
    assert retention["history_table"].endswith("site_events")
    early = min(t["txn_id"] for t in site.transactions())
    refused = project.run_fails(
        "run-operation", "lakehistory.tag", "--args", json.dumps({"name": "gone", "txn": early})
    )
    assert "may have removed" in refused

    cleanup(project, before_version=cutoff)
    after = {name: rows(project, name) for name in names}

    # What goes, by hand. Sites 1 and 2 are rows 1, 2 (round 1) and 3, 4 (the corrections);
    # sensors 10 and 11 rows 1, 2 and 3, 4. Sensor row 2 (11, val 110) is superseded and nothing
    # points at it; once it is gone, nothing points at site row 2 either. Sensor row 1 and site
    # row 1 are superseded too, but reading row 1 points at sensor row 1, which points at site row 1.
    def ids(name: str, table: str, keep: list[dict]) -> set[int]:
        return {r[HX[table]] for r in before[name]} - {r[HX[table]] for r in keep}

    assert ids("site_hx", "site", after["site_hx"]) == {2}
    assert ids("sensor_hx", "sensor", after["sensor_hx"]) == {2}
    assert ids("reading_hx", "reading", after["reading_hx"]) == set()
    # Events and states: each site's round-1 entry goes; the corrections (its last at the cutoff) stay.
    s1 = min(t["txn_id"] for t in site.transactions())
    assert sorted((r["site_id"], r["_hist_event"]) for r in before["site_events"] if r not in after["site_events"]) == [
        (1, 1),
        (2, 1),
    ]
    assert all(r["_hist_trans_id"] == s1 for r in before["site_events"] if r not in after["site_events"])
    assert sorted((r["site_id"], r["version"]) for r in before["site_states"] if r not in after["site_states"]) == [
        (1, 1),
        (2, 1),
    ]

    # Every history foreign key still finds its parent row.
    site_ids = {r["site_hx_id"] for r in after["site_hx"]}
    sensor_ids = {r["sensor_hx_id"] for r in after["sensor_hx"]}
    assert {r["site_hx_id"] for r in after["sensor_hx"]} <= site_ids
    assert {r["sensor_hx_id"] for r in after["reading_hx"]} <= sensor_ids

    # Every answer as of the cutoff or later is the same.
    for table in ("site", "sensor", "reading"):
        name = f"{table}_hx"
        assert hx_readings(after[name], table, later) == hx_readings(before[name], table, later), name
    data = ["site_id", "name"]
    for v in later:
        assert replay_events(after["site_events"], ["site_id"], data, v) == replay_events(
            before["site_events"], ["site_id"], data, v
        ), f"events as of {v}"
        assert replay_states(after["site_states"], ["site_id"], data, v) == replay_states(
            before["site_states"], ["site_id"], data, v
        ), f"states as of {v}"

    # A transaction the models have not recorded yet keeps the rows it closed: site 1's new
    # version ends A2, and its events pair A2 with A3. Were the closed A2 row gone, its
    # transaction would seem to have brought A2 as well, and the events would restate it.
    site.land(batch("site", SITE, "site_id", 4, "di", [version(T(8), site_id=1, name="A3")]))
    site.run()  # the history table alone
    s4 = site.transactions()[-1]["txn_id"]
    closed = [r for r in site.physical_rows() if r["name"] == "A2" and r["valid_to"] == s4]
    assert len(closed) == 1
    cleanup(project, model="site", before_version=s4)
    assert [r for r in site.physical_rows() if r in closed] == closed, "a row the events still need was removed"
    build()
    events = [r for r in rows(project, "site_events") if r["_hist_trans_id"] == s4]
    assert sorted((r["_hist_event"], r["name"]) for r in events) == [(3, "A2"), (4, "A3")]
    # the states chain goes on from the state the first cleanup kept (version 2)
    versions = sorted(r["version"] for r in rows(project, "site_states") if r["site_id"] == 1)
    assert versions == list(range(2, versions[-1] + 1)) and len(versions) >= 3


# --- the demo ----------------------------------------------------------------------------------


def _copy_schema(spark, source: str, target: str, folder: Path) -> None:
    """Every Delta table of `source` (files and log copied, so their history is the same) as a
    table of `target`: the demo stays as the other tests read it."""
    spark.sql(f"create schema `{target}`")
    for name in stored_tables(spark, source):
        detail = spark.sql(f"describe detail `{source}`.`{name}`").first()
        copy = folder / name
        shutil.copytree(detail.location.removeprefix("file:"), copy)
        spark.sql(f"create table `{target}`.`{name}` using delta location '{copy}'")
    # The copy's log names its own tables, as a branch's does: else its writer finds its history
    # tables unrecorded and records their commits again.
    spark.sql(
        f"update `{target}`.lakehistory_transactions"
        f" set history_table = replace(history_table, '{source}.', '{target}.')"
    )


def _differences(spark, query: str, before: str, after: str) -> int:
    """Rows `query` gives over one schema and not the other (`{s}` is the schema)."""
    a, b = (spark.sql(query.replace("{s}", f"`{s}`")) for s in (before, after))
    return a.exceptAll(b).count() + b.exceptAll(a).count()


def test_cleanup_of_the_demo_keeps_every_history_foreign_key_and_every_answer_from_the_cutoff_on(
    demo: DbtProject, tmp_path: Path
) -> None:
    spark = demo.spark
    copy = DbtProject(demo.project_dir, unique_schema("demo_cleanup"))
    _copy_schema(spark, demo.schema, copy.schema, tmp_path / "warehouse")
    txns = [
        r.txn_id for r in spark.sql(f"select txn_id from `{demo.schema}`.lakehistory_transactions order by 1").collect()
    ]
    cutoff = txns[-2]  # the demo's two days bring few changes: clean up to the last but one
    nodes = json.loads((demo.project_dir / "target" / "manifest.json").read_text())["nodes"].values()
    models = {n["name"]: n for n in nodes if n["resource_type"] == "model"}
    history = {
        name: n["config"]["unique_key"]
        for name, n in models.items()
        if n["config"].get("incremental_strategy") == "fivetran_history"
    }
    hx = {
        name: n["config"]["meta"]["lakehistory"]["hx"]
        for name, n in models.items()
        if "hx" in (n["config"]["meta"].get("lakehistory") or {})
    }

    # events and states are built from history tables, and from snapshots of extracts
    extracts = {
        n["name"]: n["config"]["unique_key"]
        for n in nodes
        if n["resource_type"] == "snapshot" and (n["config"].get("meta") or {}).get("lakehistory", {}).get("extract")
    }
    keys = {**history, **extracts}

    def key_of(node: dict) -> list[str]:
        (source,) = [keys[d.split(".")[-1]] for d in node["depends_on"]["nodes"] if d.split(".")[-1] in keys]
        return [source] if isinstance(source, str) else source

    def macro(name: str) -> dict[str, list[str]]:
        return {m: key_of(n) for m, n in models.items() if f"macro.lakehistory.{name}" in n["depends_on"]["macros"]}

    events, states = macro("event_history"), macro("feature_states")
    assert history and hx and events and states
    counts = {}
    for name in [*history, *hx, *events, *states]:
        counts[name] = spark.sql(f"select count(*) from `{demo.schema}`.`{name}`").first()[0]

    # A tag on an early transaction keeps every answer as of it too (lakehistory.tag).
    tagged = txns[len(txns) // 3]
    target = ("--target-path", str(tmp_path / "target"))
    copy.run_ok("run-operation", "lakehistory.tag", "--args", json.dumps({"name": "early", "txn": tagged}), *target)
    copy.run_ok("run-operation", "lakehistory.cleanup", "--args", json.dumps({"before_version": cutoff}), *target)
    removed = {
        name: n - spark.sql(f"select count(*) from `{copy.schema}`.`{name}`").first()[0] for name, n in counts.items()
    }
    assert sum(removed.values()) > 0, f"the cleanup removed nothing: {removed}"

    later = (
        f"(select txn_id as v from {{s}}.lakehistory_transactions"
        f" where txn_id >= {cutoff} and txn_id <= {txns[-1]} or txn_id = {tagged})"
    )
    # Every history foreign key finds its parent row.
    for name, spec in hx.items():
        for fk in spec.get("foreign_keys") or []:
            column = f"{hx[fk['parent']]['table']}_hx_id"
            dangling = spark.sql(
                f"select count(*) from `{copy.schema}`.`{name}` as c"
                f" left anti join `{copy.schema}`.`{fk['parent']}` as p on c.`{column}` = p.`{column}`"
                f" where c.`{column}` is not null"
            ).first()[0]
            assert dangling == 0, f"{name}.{column}: {dangling} row(s) point at a removed {fk['parent']} row"
    # Every answer as of a transaction from the cutoff on, or as of the tag, is the same.
    for name in history:
        query = f"select v, h.* from {{s}}.`{name}` as h inner join {later} on h.valid_from <= v and h.valid_to > v"
        assert _differences(spark, query, demo.schema, copy.schema) == 0, f"{name} as of a transaction after the cutoff"
    for name, spec in hx.items():
        key, id_ = ", ".join(f"`{k}`" for k in spec["key"]), f"`{spec['table']}_hx_id`"
        on = " and ".join(f"h.`{k}` = p.`{k}`" for k in spec["key"])
        query = (
            f"select p.*, v, max(struct(h.mod_time, h.{id_})).{id_[1:-1]} as reading"
            f" from (select distinct {key}, mod_time as t from `{demo.schema}`.`{name}`) as p cross join {later}"
            f" inner join {{s}}.`{name}` as h on {on} and h.mod_time <= p.t and h.txn_id <= v"
            f" group by all"
        )
        assert _differences(spark, query, demo.schema, copy.schema) == 0, (
            f"{name} read as of a transaction after the cutoff"
        )
    for name, key in events.items():
        # replay order: transaction, valid time (none last), then update_from before update_to
        order = "struct(e._hist_trans_id, coalesce(e._hist_valid_time, timestamp'9999-12-31'), e._hist_event)"
        query = (
            f"select * from (select {', '.join(key)}, v, max_by(struct(e.*), {order}) as last"
            f" from {{s}}.`{name}` as e inner join {later} on e._hist_trans_id <= v group by all)"
            " where last._hist_event in (1, 4)"
        )
        assert _differences(spark, query, demo.schema, copy.schema) == 0, (
            f"{name} replayed to a transaction after the cutoff"
        )
    for name, key in states.items():
        query = (
            f"select * from (select {', '.join(key)}, v, max_by(struct(s.*), s.version) as last"
            f" from {{s}}.`{name}` as s inner join {later} on s.txn_id <= v group by all) where not last.deleted"
        )
        assert _differences(spark, query, demo.schema, copy.schema) == 0, f"{name} as of a transaction after the cutoff"
