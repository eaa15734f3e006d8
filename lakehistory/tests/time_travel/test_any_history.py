"""Time travel over any history: dbt snapshots, `_hx` tables and the feature states of the demo
read through `as_of`, `current` and every SQL:2011 form of `history`, their periods found from
what each table is or from its config. Every answer is checked against the table's own rows, read
and filtered (or replayed) by the test."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

from demo_reference import compile_many

from harness import DbtProject
from oracle.replay import STATE_COLUMNS, replay_states

# form -> (the bounds it takes, does a row [start, end) with end None = open match a, b)
FORMS: dict[str, Callable] = {
    "as_of": lambda s, e, a, b: s <= a and (e is None or e > a),
    "from_to": lambda s, e, a, b: s < b and (e is None or e > a),
    "between": lambda s, e, a, b: s <= b and (e is None or e > a),
    "contained_in": lambda s, e, a, b: s >= a and e is not None and e <= b,
    "all": lambda s, e, a, b: True,
}
US = dt.timedelta(microseconds=1)
BOUNDS = "'lh_test_a', 'lh_test_b'"  # session variables, set per probe


def hx_periods(demo: DbtProject, table: str, key: str, hx_id: str) -> dict[int, tuple]:
    """An `_hx` table's rows with their periods: from mod_time to the key's next row (by mod_time,
    then id); a deletion row ends the period before it and is no version itself."""
    rows = sorted(demo.rows(f"select * from {{schema}}.`{table}`"), key=lambda r: (r[key], r["mod_time"], r[hx_id]))
    out = {}
    for row, after in zip(rows, [*rows[1:], None], strict=True):
        end = after["mod_time"] if after is not None and after[key] == row[key] else None
        if not row["deleted"]:
            out[row[hx_id]] = (row[key], row["mod_time"], end)
    return out


def probes(periods: dict) -> list[tuple[dt.datetime, dt.datetime]]:
    """Bounds around the periods' edges: each start, the instant before it, and pairs of them."""
    starts = sorted({p[1] for p in periods.values()})
    points = sorted({s - US for s in starts[:3]} | set(starts[:3]) | set(starts[-2:]) | {starts[-1] + US})
    return [(a, b) for a in points for b in points if a <= b][::3]


def check_every_form(project: DbtProject, table: str, id_column: str, periods: dict) -> None:
    """history() in every form, as_of and current over `table`, against its `periods`."""
    assert any(p[2] is None for p in periods.values()) and any(p[2] is not None for p in periods.values())
    ref = f"ref('{table}')"
    queries = compile_many(
        project,
        {
            **{f"history {f}": f"select * from {{{{ lakehistory.history({ref}, '{f}', {BOUNDS}) }}}}" for f in FORMS},
            "as_of": f"select * from {{{{ lakehistory.as_of({ref}, 'lh_test_a') }}}}",
            "current": f"select * from {{{{ lakehistory.current({ref}) }}}}",
        },
    )
    project.spark.sql("declare or replace variable lh_test_a timestamp")
    project.spark.sql("declare or replace variable lh_test_b timestamp")

    def ids(query: str) -> set:
        return {r[id_column] for r in project.rows(query)}

    found = 0
    for a, b in probes(periods):
        project.spark.sql(f"set var lh_test_a = timestamp'{a}'")
        project.spark.sql(f"set var lh_test_b = timestamp'{b}'")
        for form, matches in FORMS.items():
            want = {i for i, (_, s, e) in periods.items() if matches(s, e, a, b)}
            assert ids(queries[f"history {form}"]) == want, f"{table}: history {form} {a} {b}"
            found += len(want)
        want = {i for i, (_, s, e) in periods.items() if FORMS["as_of"](s, e, a, b)}
        assert ids(queries["as_of"]) == want, f"{table}: as_of {a}"
    assert found > 10, "the probes found too few rows to say much"
    assert ids(queries["current"]) == {i for i, p in periods.items() if p[2] is None}


def test_every_form_reads_an_hx_table_by_its_own_periods(demo: DbtProject) -> None:
    # networks: one is deleted on the first day, so its versions have closed periods
    periods = hx_periods(demo, "meta_network_hx", "network_id", "meta_network_hx_id")
    check_every_form(demo, "meta_network_hx", "meta_network_hx_id", periods)


EXTRACT_DAY_1 = """id,label,updated_at
1,a,2024-01-01 10:00:00
2,b,2024-01-01 10:00:00
3,c,2024-01-01 10:00:00
"""
# id 1 changes, id 2 is gone (a deletion record), id 4 is new
EXTRACT_DAY_2 = """id,label,updated_at
1,a2,2024-01-01 12:00:00
3,c,2024-01-01 10:00:00
4,d,2024-01-01 12:00:00
"""
SNAPSHOTS = """
snapshots:
  - name: extract_snapshot
    relation: ref('extract')
    config: {unique_key: id, strategy: timestamp, updated_at: updated_at, hard_deletes: new_record}
  - name: renamed_snapshot
    relation: ref('extract')
    config:
      unique_key: id
      strategy: timestamp
      updated_at: updated_at
      hard_deletes: new_record
      dbt_valid_to_current: "timestamp'9999-12-31 00:00:00'"
      snapshot_meta_column_names: {dbt_valid_from: seen_from, dbt_valid_to: seen_to, dbt_is_deleted: gone}
"""


def test_every_form_reads_dbt_snapshots_by_their_own_periods(dbt_project: DbtProject) -> None:
    """Two days of an extract captured by two snapshots: dbt's column names with NULL open ends,
    and renamed columns with a `dbt_valid_to_current` open end."""
    seeds = dbt_project.project_dir / "seeds"
    (dbt_project.project_dir / "snapshots").mkdir(exist_ok=True)
    (dbt_project.project_dir / "snapshots" / "_extract_snapshots.yml").write_text(SNAPSHOTS)
    (seeds / "_extract.yml").write_text(
        "seeds:\n  - name: extract\n    config: {column_types: {id: int, label: string, updated_at: timestamp}}\n"
    )
    for day in (EXTRACT_DAY_1, EXTRACT_DAY_2):
        (seeds / "extract.csv").write_text(day)
        dbt_project.run_ok("build", "--select", "extract", "extract_snapshot", "renamed_snapshot", "--full-refresh")
    for table, names in (
        ("extract_snapshot", ("dbt_valid_from", "dbt_valid_to", "dbt_is_deleted")),
        ("renamed_snapshot", ("seen_from", "seen_to", "gone")),
    ):
        start, end, deleted = names
        rows = dbt_project.rows(f"select * from {{schema}}.`{table}`")
        assert sum(r[deleted] == "True" for r in rows) == 1, rows  # id 2's deletion record
        open_end = None if table == "extract_snapshot" else dt.datetime(9999, 12, 31)
        periods = {
            r["dbt_scd_id"]: (r["id"], r[start], None if r[end] == open_end else r[end])
            for r in rows
            if r[deleted] != "True"
        }
        assert len(periods) == 5, rows
        check_every_form(dbt_project, table, "dbt_scd_id", periods)


def test_as_of_an_hx_table_agrees_with_hx_as_of(demo: DbtProject) -> None:
    """The two readings of an `_hx` table at an instant: the period's, and the per-key latest row."""
    ref = "ref('obs_raw_hx')"
    queries = compile_many(
        demo,
        {
            "period": f"select obs_raw_hx_id from {{{{ lakehistory.as_of({ref}, 'lh_test_a') }}}}",
            "latest": f"select obs_raw_hx_id from {{{{ lakehistory.hx_as_of({ref}, 'lh_test_a') }}}}",
        },
    )
    demo.spark.sql("declare or replace variable lh_test_a timestamp")
    times = sorted(r["mod_time"] for r in demo.rows("select distinct mod_time from {schema}.obs_raw_hx"))
    for at in [times[0] - US, *times[:: max(1, len(times) // 8)], times[-1]]:
        demo.spark.sql(f"set var lh_test_a = timestamp'{at}'")
        period, latest = (sorted(r["obs_raw_hx_id"] for r in demo.rows(queries[q])) for q in ("period", "latest"))
        assert period == latest, f"as of {at}"
        assert bool(period) == (at >= times[0]), f"as of {at}"


STATES = {"meta_network_states": "network_id", "meta_station_states": "station_id", "obs_raw_states": "obs_raw_id"}


def test_feature_states_as_of_every_transaction_by_the_period_their_config_names(demo: DbtProject) -> None:
    """The demo's states models name their period (meta.lakehistory.period: from txn_id until the
    key's next state, DELETE states ending it): as_of gives the table Naksha's rule rebuilds. (The
    demo's two days change few keys twice; the events tests read states with updates, deletes
    and re-inserts through the same period.)"""
    as_of = "select * from {{{{ lakehistory.as_of(ref('{}'), 'lh_test_v') }}}}"
    queries = compile_many(demo, {t: as_of.format(t) for t in STATES})
    demo.spark.sql("declare or replace variable lh_test_v bigint")
    txns = sorted(r["txn_id"] for r in demo.rows("select txn_id from {schema}.lakehistory_transactions"))
    for table, key in STATES.items():
        states = demo.rows(f"select * from {{schema}}.`{table}`")
        data = sorted(c for c in states[0] if c not in STATE_COLUMNS)
        for v in [0, *txns]:
            demo.spark.sql(f"set var lh_test_v = {v}")
            got = {(r[key],): tuple(r[c] for c in data) for r in demo.rows(queries[table])}
            assert got == replay_states(states, [key], data, v), f"{table} as of {v}"


ATOTI_PRICES = """id,label,valid_from,valid_to
1,a,1,3
1,a2,3,2147483647
2,b,1,2
3,c,2,2147483647
4,d,4,2147483647
"""
ATOTI_PERIOD = {"valid_from": "valid_from", "valid_to": "valid_to", "open_end": 2147483647}


def test_a_table_written_the_atoti_way_reads_by_its_open_end(dbt_project: DbtProject) -> None:
    """Seed 004: open rows hold the table's own open end (validRowToColumnValue, here
    Integer.MAX_VALUE). Read by the period its config names, and by the `period` argument."""
    seeds = dbt_project.project_dir / "seeds"
    (seeds / "atoti_prices.csv").write_text(ATOTI_PRICES)
    (seeds / "_atoti.yml").write_text(
        "seeds:\n  - name: atoti_prices\n    config:\n"
        "      column_types: {id: int, label: string, valid_from: bigint, valid_to: bigint}\n"
        f"      meta: {{lakehistory: {{period: {json.dumps(ATOTI_PERIOD)}}}}}\n"
    )
    dbt_project.run_ok("seed", "--select", "atoti_prices")
    ref = "ref('atoti_prices')"
    queries = compile_many(
        dbt_project,
        {
            "current": f"select * from {{{{ lakehistory.current({ref}) }}}}",
            "current by argument": f"select * from {{{{ lakehistory.current({ref}, period={ATOTI_PERIOD!r}) }}}}",
            **{f"as_of {v}": f"select * from {{{{ lakehistory.as_of({ref}, {v}) }}}}" for v in range(5)},
            "contained": f"select * from {{{{ lakehistory.history({ref}, 'contained_in', 1, 2147483647) }}}}",
            "version": f"select {{{{ lakehistory.current_version({ref}) }}}} as v",
            "version by argument": f"select {{{{ lakehistory.current_version({ref}, period={ATOTI_PERIOD!r}) }}}} as v",
        },
    )

    def rows(name: str) -> set:
        return {(r["id"], r["label"]) for r in dbt_project.rows(queries[name])}

    current = {(1, "a2"), (3, "c"), (4, "d")}
    assert rows("current") == rows("current by argument") == current
    assert [rows(f"as_of {v}") for v in range(5)] == [
        set(),
        {(1, "a"), (2, "b")},
        {(1, "a"), (3, "c")},
        {(1, "a2"), (3, "c")},
        current,
    ]
    assert rows("contained") == {(1, "a"), (2, "b")}, "an open row is never contained, whatever the bound"
    assert [dbt_project.rows(queries[q])[0]["v"] for q in ("version", "version by argument")] == [4, 4]
