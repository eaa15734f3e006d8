"""The CRMP demo generator: determinism, valid batches, every kind of change, referential integrity.

Pure Python (no Spark, no dbt). Batches are checked structurally (spec/fivetran-history-mode.md),
then applied with a small reference merge (rules 6-11) and compared with the simulator's own
true history: what the batches say must be exactly what happened at the source.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections import defaultdict

import numpy as np
import pytest

from lakehistory.landing.batch import ONE_MS, TMAX, UNMODIFIED, Batch
from lakehistory.names import ACTIVE, END, START, SYNCED
from lakehistory_tools.generator import GeneratorConfig, SourceSimulator, generate, landed_syncs
from lakehistory_tools.generator.batches import TMAX_MS, key_intervals, ms_to_dt, to_ms, to_python
from lakehistory_tools.generator.domain import OBS_RAW, TABLE_NAMES, TABLES, domain_as_dict, get_table

UTC = dt.UTC


# --------------------------------------------------------------------------------------------
# a run shared by several tests


def _run(scale: int, syncs: int, seed: int, **kw) -> tuple[SourceSimulator, dict[str, list[Batch]]]:
    sim = SourceSimulator(GeneratorConfig(scale=scale, syncs=syncs, seed=seed, horizon=syncs + 1, **kw))
    out: dict[str, list[Batch]] = defaultdict(list)
    for _ in sim.run():
        for t in TABLE_NAMES:
            out[t].append(sim.batch(t)[0])
    return sim, out


@pytest.fixture(scope="module")
def run():
    return _run(scale=40, syncs=8, seed=7)


# --------------------------------------------------------------------------------------------
# a compact reference merge (rules 6-11) over Batch objects


def apply(dest: dict[int, list[dict]], batch: Batch) -> None:
    """dest: key -> rows (dicts with data and system columns), per key in start order."""
    (kc,) = batch.key
    data = [c.name for c in batch.columns if c.name != kc]
    earliest = {}
    for r in batch.earliest:
        earliest[r[kc]] = min(earliest.get(r[kc], r[START]), r[START])
    for k, e in earliest.items():  # rules 7 and 8
        rows = [r for r in dest.get(k, []) if r[START] < e]
        for r in rows:
            if r[ACTIVE]:
                r[ACTIVE], r[END] = False, e - ONE_MS
        dest[k] = rows
    versions = sorted(
        [(r[kc], r[START], "replace", r) for r in batch.replace]
        + [(r[kc], r[START], "update", r) for r in batch.update],
        key=lambda x: (x[0], x[1]),
    )
    for k, _, kind, r in versions:  # rules 9 and 10
        row = dict(r)
        if kind == "update":
            prev = [p for p in dest.get(k, []) if p[START] < r[START]]
            assert prev, f"{batch.table} {batch.batch_id}: update for key {k} without a previous version"
            for c in data:
                if row[c] is UNMODIFIED:
                    row[c] = prev[-1][c]
        dest.setdefault(k, []).append(row)
        dest[k].sort(key=lambda x: x[START])
    for r in batch.delete:  # rule 11
        for p in dest.get(r[kc], []):
            if p[ACTIVE]:
                p[ACTIVE], p[END] = False, r[END]


def truth(sim: SourceSimulator, table: str) -> dict[int, list[tuple]]:
    """The simulator's true history: key -> [(start, end, values...)]."""
    tdef = get_table(table)
    ev = sim.events(table)
    data = tdef.data_columns
    cols = {c: to_python(np.asarray(ev.values[c]), tdef.types[c]) for c in data}
    out = {}
    for k, versions in key_intervals(ev).items():
        out[k] = [(ms_to_dt(s), ms_to_dt(e)) + tuple(cols[c][i] for c in data) for s, e, i in versions]
    return out


def rebuilt(batches: list[Batch], table: str) -> dict[int, list[tuple]]:
    dest: dict[int, list[dict]] = {}
    for b in batches:
        apply(dest, b)
    data = get_table(table).data_columns
    return {k: [(r[START], r[END]) + tuple(r[c] for c in data) for r in rows] for k, rows in dest.items() if rows}


# --------------------------------------------------------------------------------------------
# domain


def test_domain_tables_keys_and_foreign_keys():
    assert TABLE_NAMES == ("meta_network", "meta_station", "meta_history", "meta_vars", "obs_raw")
    obs = get_table("obs_raw")
    assert obs.key == ("obs_raw_id",)
    assert [(fk.columns, fk.ref_table, fk.hx_column) for fk in obs.foreign_keys] == [
        (("history_id",), "meta_history", "meta_history_hx_id"),
        (("vars_id",), "meta_vars", "meta_vars_hx_id"),
    ]
    assert get_table("meta_history").types["sdate"] == "date"
    seen = set()
    for t in TABLES:  # parents come first
        for fk in t.foreign_keys:
            assert fk.ref_table in seen
            assert fk.ref_columns == get_table(fk.ref_table).key
        seen.add(t.name)
    assert json.loads(json.dumps(domain_as_dict()))["tables"][4]["hx_table"] == "obs_raw_hx"


# --------------------------------------------------------------------------------------------
# determinism


def _fingerprint(batches: dict[str, list[Batch]]) -> list:
    return [
        (t, b.batch_id, b.sequence, repr(b.replace), repr(b.update), repr(b.delete), repr(b.earliest))
        for t in TABLE_NAMES
        for b in batches[t]
    ]


def test_same_seed_same_batches_other_seed_other_batches():
    a = _fingerprint(_run(12, 4, seed=3)[1])
    b = _fingerprint(_run(12, 4, seed=3)[1])
    c = _fingerprint(_run(12, 4, seed=4)[1])
    assert a == b
    assert a != c


def assert_same_tree(one, two) -> None:
    """The same files under both roots, byte for byte."""
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files
    assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    for f in files:
        assert (one / f).read_bytes() == (two / f).read_bytes(), f


def test_landing_is_byte_identical_for_a_seed(tmp_path):
    for name in ("one", "two"):
        generate(tmp_path / name, GeneratorConfig(scale=8, syncs=3, seed=11), file_format="csv", compression="gzip")
    assert_same_tree(tmp_path / "one", tmp_path / "two")


def test_landing_one_sync_at_a_time_equals_a_full_run(tmp_path):
    config = GeneratorConfig(scale=8, syncs=3, seed=11, extract_author="nightly-dump")
    kw = {"file_format": "csv", "compression": "gzip", "extract_tables": ["meta_vars", "obs_raw"]}
    tables, extracts = list(TABLE_NAMES), kw["extract_tables"]
    generate(tmp_path / "full", config, **kw)
    daily = tmp_path / "daily"
    assert landed_syncs(daily, tables, extracts) == 0
    for k in (1, 2, 3):
        summary = generate(daily, config, only_sync=k, **kw)
        assert summary.tables["meta_station"].batches == summary.tables["meta_vars"].extract_files == 1
        assert landed_syncs(daily, tables, extracts) == k
        assert landed_syncs(daily, tables, extracts, syncs=2) == min(k, 2)
    assert_same_tree(tmp_path / "full", daily)
    assert landed_syncs(tmp_path / "full", tables, extracts, syncs=3) == 3
    # history-mode folders are looked for where extracts are not, and the other way round
    assert landed_syncs(daily, tables, ()) == 0
    assert landed_syncs(daily, ["meta_vars"], ["meta_vars"], start=dt.date(2024, 1, 2)) == 2


def test_landed_syncs_stops_at_the_first_gap(tmp_path):
    config = GeneratorConfig(scale=3, syncs=3, seed=2)
    tables = ["meta_network", "meta_station"]
    generate(tmp_path, config, tables=tables, extract_tables=["meta_station"], only_sync=2)
    assert landed_syncs(tmp_path, tables, ["meta_station"]) == 0
    generate(tmp_path, config, tables=tables[:1], only_sync=1)
    assert landed_syncs(tmp_path, tables[:1], ()) == 2
    assert landed_syncs(tmp_path, tables, ["meta_station"]) == 0  # meta_station's sync 1 is missing
    with pytest.raises(ValueError, match="only_sync"):
        generate(tmp_path, config, tables=tables, only_sync=4)
    with pytest.raises(ValueError, match="extract tables"):
        landed_syncs(tmp_path, ["meta_network"], ["meta_vars"])


def test_keeping_every_observation_changes_nothing_but_memory():
    pruned = SourceSimulator(GeneratorConfig(scale=6, syncs=5, seed=8, horizon=2))
    kept = SourceSimulator(GeneratorConfig(scale=6, syncs=5, seed=8, horizon=2, keep_all_obs=True))
    for _ in pruned.run():
        kept.advance()
        assert repr(pruned.batch("obs_raw")[0]) == repr(kept.batch("obs_raw")[0])
    assert pruned.obs.base > 1 and kept.obs.complete


def test_metadata_do_not_depend_on_which_tables_are_written():
    with_obs = SourceSimulator(GeneratorConfig(scale=10, syncs=3, seed=5))
    without = SourceSimulator(GeneratorConfig(scale=10, syncs=3, seed=5, with_obs=False))
    for _ in with_obs.run():
        without.advance()
        for t in TABLE_NAMES[:4]:
            assert repr(with_obs.batch(t)[0].replace) == repr(without.batch(t)[0].replace)


# --------------------------------------------------------------------------------------------
# structure of every batch


def _whole_ms_utc(v) -> bool:
    return (
        isinstance(v, dt.datetime)
        and v.tzinfo is not None
        and v.utcoffset() == dt.timedelta(0)
        and v.microsecond % 1000 == 0
    )


def check_batch(b: Batch, synced: dt.datetime) -> None:
    tdef = get_table(b.table)
    (kc,) = tdef.key
    names = set(tdef.column_names) | {START, END, ACTIVE, SYNCED}
    assert b.key == [kc] and [c.name for c in b.columns] == list(tdef.column_names)
    versions = defaultdict(list)
    for kind, rows in (("replace", b.replace), ("update", b.update)):
        for r in rows:
            assert set(r) == names, (b.table, kind, set(r) ^ names)
            for c in tdef.column_names:
                if r[c] is UNMODIFIED:
                    assert kind == "update" and c != kc, (b.table, kind, c)
                elif r[c] is None:
                    assert c in tdef.nullable, (b.table, c)
            for c in (START, END, SYNCED):
                assert _whole_ms_utc(r[c]), (b.table, c, r[c])
            assert r[SYNCED] == synced
            assert r[START] <= r[END]
            assert r[ACTIVE] == (r[END] == TMAX)
            versions[r[kc]].append(r)
    deletes = {}
    for r in b.delete:
        assert set(r) == {kc, END} and _whole_ms_utc(r[END])
        assert r[kc] not in deletes, "one delete row per key"
        deletes[r[kc]] = r[END]
    earliest = {}
    for r in b.earliest:
        assert r[kc] not in earliest, "one earliest row per key"
        earliest[r[kc]] = r[START]
    assert set(earliest) == set(versions), "earliest rows for exactly the keys with replace/update rows"
    for k, rows in versions.items():
        rows.sort(key=lambda r: r[START])
        starts = [r[START] for r in rows]
        assert len(set(starts)) == len(starts), f"{b.table}: duplicate (key, start) for {k}"
        assert earliest[k] == starts[0]
        for r, nxt in zip(rows, rows[1:]):
            if r[ACTIVE] or r[END] != nxt[START] - ONE_MS:  # otherwise a gap across a delete
                assert not r[ACTIVE] and r[END] < nxt[START] - ONE_MS, (b.table, k)
        if k in deletes:
            assert not rows[-1][ACTIVE] and rows[-1][END] == deletes[k]


def test_every_batch_is_valid(run):
    sim, batches = run
    for t in TABLE_NAMES:
        assert [b.batch_id for b in batches[t]] == [f"{i:06d}" for i in range(1, 9)]
        assert [b.sequence for b in batches[t]] == list(range(1, 9))
        for i, b in enumerate(batches[t], start=1):
            assert b.table == t
            check_batch(b, sim.sync_time(i))


def test_batches_rebuild_the_true_source_history(run):
    sim, batches = run
    for t in TABLE_NAMES:
        assert rebuilt(batches[t], t) == truth(sim, t), t


def test_valid_time_is_strictly_increasing_per_key(run):
    sim, _ = run
    for t in TABLE_NAMES:
        for versions in truth(sim, t).values():
            starts = [v[0] for v in versions]
            assert starts == sorted(set(starts))


# --------------------------------------------------------------------------------------------
# every kind of change happens


def kinds_of(batches: list[Batch], table: str) -> dict[str, int]:
    (kc,) = get_table(table).key
    found = defaultdict(int)
    sent_max: dict[int, dt.datetime] = {}
    deleted_at: dict[int, dt.datetime] = {}
    for b in batches:
        per_key = defaultdict(int)
        for r in b.replace:
            per_key[r[kc]] += 1
            found["replace"] += 1
            found["null_in_replace"] += any(v is None for v in r.values())
            if r[kc] in deleted_at and r[START] > deleted_at[r[kc]]:
                found["resurrection"] += 1
        for r in b.update:
            per_key[r[kc]] += 1
            found["partial_update"] += any(v is UNMODIFIED for v in r.values())
            found["explicit_null_update"] += any(v is None for v in r.values())
        found["several_versions"] += sum(1 for n in per_key.values() if n > 1)
        for r in b.earliest:
            if r[kc] in sent_max and r[START] < sent_max[r[kc]]:
                found["late"] += 1
        for r in b.delete:
            found["delete"] += 1
            deleted_at[r[kc]] = r[END]
        for r in [*b.replace, *b.update]:
            sent_max[r[kc]] = max(sent_max.get(r[kc], r[START]), r[START])
            if not r[ACTIVE] and r[kc] not in {d[kc] for d in b.delete}:
                deleted_at.setdefault(r[kc], r[END])
    return dict(found)


KINDS = (
    "replace",
    "partial_update",
    "null_in_replace",
    "explicit_null_update",
    "several_versions",
    "delete",
    "resurrection",
    "late",
)


def test_every_kind_of_change_occurs_in_obs_raw(run):
    _, batches = run
    found = kinds_of(batches["obs_raw"], "obs_raw")
    assert {k for k in KINDS if found.get(k, 0) > 0} == set(KINDS), found


def test_every_kind_of_change_occurs_in_the_metadata(run):
    _, batches = run
    total = defaultdict(int)
    for t in TABLE_NAMES[:4]:
        found = kinds_of(batches[t], t)
        assert found.get("replace") and found.get("partial_update"), (t, found)
        for k, n in found.items():
            total[k] += n
    assert {k for k in KINDS if total.get(k, 0) > 0} == set(KINDS), dict(total)


def test_simulator_counts_every_kind(run):
    sim, _ = run
    counts = sim.counts()["obs_raw"]
    for what in ("insert", "update", "set_null", "delete", "resurrect", "late"):
        assert counts.get(what, 0) > 0, (what, counts)


# --------------------------------------------------------------------------------------------
# referential integrity over valid time


def _alive_spans(versions: list[tuple]) -> list[tuple[dt.datetime, dt.datetime]]:
    spans: list[list[dt.datetime]] = []
    for v in versions:
        if spans and v[0] == spans[-1][1] + ONE_MS:
            spans[-1][1] = v[1]
        else:
            spans.append([v[0], v[1]])
    return [(a, b) for a, b in spans]


def test_foreign_keys_point_to_parents_alive_at_the_childs_time(run):
    sim, batches = run
    tables = {t: rebuilt(batches[t], t) for t in TABLE_NAMES}
    horizon = sim.sync_time(sim.sync)
    checked = 0
    for tdef in TABLES:
        data = tdef.data_columns
        for fk in tdef.foreign_keys:
            (col,) = fk.columns
            j = 2 + data.index(col)
            spans = {k: _alive_spans(v) for k, v in tables[fk.ref_table].items()}
            for k, versions in tables[tdef.name].items():
                for v in versions:
                    start, end = v[0], min(v[1], horizon)
                    parent = v[j]
                    assert any(a <= start and end <= b for a, b in spans.get(parent, ())), (
                        f"{tdef.name} {k} -> {fk.ref_table} {parent} not alive over [{start}, {end}]"
                    )
                    checked += 1
    assert checked > 1000


def test_obs_reference_variables_of_their_stations_network(run):
    sim, _ = run
    meta = sim.meta
    cur = sim.obs.current()
    for h, v in zip(cur["history_id"][:2000].tolist(), cur["vars_id"][:2000].tolist()):
        sid = meta.hinfo[h].station_id
        assert meta.sinfo[sid].network_id == meta.vinfo[v].network_id


def test_values_are_realistic(run):
    sim, batches = run
    hist = [r for b in batches["meta_history"] for r in b.replace]
    assert all(48.0 < r["lat"] < 61.0 and -140.0 < r["lon"] < -113.0 for r in hist if r["lat"] is not None)
    assert {r["province"] for r in hist} <= {"BC", "AB", "YT"}
    names = {r["standard_name"] for b in batches["meta_vars"] for r in b.replace}
    assert {"air_temperature", "precipitation_amount"} <= names
    units = {r["unit"] for b in batches["meta_vars"] for r in b.replace}
    assert "celsius" in units and "mm" in units
    obs = [r for r in batches["obs_raw"][1].replace]
    assert all(r["obs_time"] < r[START] for r in obs)
    assert all(r["obs_time"].microsecond == 0 for r in obs)


# --------------------------------------------------------------------------------------------
# scale and memory


def test_obs_memory_is_bounded_by_the_horizon():
    sim = SourceSimulator(GeneratorConfig(scale=10, syncs=8, seed=2, horizon=2))
    inserted = [0]
    for _ in sim.run():
        inserted.append(sim.obs.counts["insert"])
        b, _ = sim.batch("obs_raw")
        check_batch(b, sim.sync_time(sim.sync))
        # only the observations of the last `horizon` syncs are kept
        assert sim.obs.memory_rows() == inserted[-1] - inserted[max(0, len(inserted) - 3)]
    assert sim.obs.base > 1


def test_scale_drives_the_sizes():
    small = SourceSimulator(GeneratorConfig(scale=10, syncs=1, seed=1))
    big = SourceSimulator(GeneratorConfig(scale=80, syncs=1, seed=1))
    small.advance()
    big.advance()
    for t in ("meta_station", "meta_history", "obs_raw"):
        assert len(big.batch(t)[0].replace) > 4 * len(small.batch(t)[0].replace), t


# --------------------------------------------------------------------------------------------
# landing: batches and daily extracts


def test_generate_lands_batches_and_daily_extracts(tmp_path):
    root = tmp_path / "landing"
    summary = generate(
        root,
        GeneratorConfig(scale=10, syncs=3, seed=9),
        file_format="parquet",
        compression="zstd",
        earliest_form="column",
        extract_tables=["meta_history", "meta_vars"],
    )
    for t in ("meta_network", "meta_station", "obs_raw"):
        folders = sorted(p.name for p in (root / t).iterdir())
        assert folders == ["000001", "000002", "000003"]
        m = json.loads((root / t / "000002" / "manifest.json").read_text())
        assert m["sequence"] == 2 and m["table"] == t and m["sync"]["id"] == "crmp-2024-01-02"
        assert all(f["path"].endswith(".parquet") and f["kind"] != "earliest" for f in m["files"])
    for t in ("meta_history", "meta_vars"):
        assert not (root / t).exists()
        files = sorted(p for p in (root / "extracts" / t).iterdir() if p.suffix == ".csv")
        assert [f.name for f in files] == ["2024-01-01.csv", "2024-01-02.csv", "2024-01-03.csv"]
        # each day's extract belongs to the day's sync, with every table of the demo
        said = json.loads((root / "extracts" / t / "2024-01-03.sync.json").read_text())
        assert said == {
            "id": "crmp-2024-01-03",
            "sequence": 3,
            "tables": ["meta_network", "meta_station", "meta_history", "meta_vars", "obs_raw"],
            "author": "crmp-loader",
            "app_id": "pcic.crmp.ingest",
        }
        with files[-1].open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert list(rows[0]) == list(get_table(t).column_names) + ["extracted_at", "extracted_by"]
        assert len(rows) == summary.tables[t].extract_rows > 0
        assert {r["extracted_by"] for r in rows} == {GeneratorConfig().extract_author} == {"pcic-crmp-dump"}
        assert len({r["extracted_at"] for r in rows}) == 1 and rows[0]["extracted_at"].startswith("2024-01-03T03:")
        key = get_table(t).key[0]
        assert [int(r[key]) for r in rows] == sorted(int(r[key]) for r in rows)
    assert summary.tables["obs_raw"].replace > 1000


def test_extract_equals_the_state_the_batches_give(tmp_path):
    sim, batches = _run(scale=10, syncs=3, seed=4)
    from lakehistory_tools.generator.land import write_extract

    for t in ("meta_history", "obs_raw"):
        sim2 = SourceSimulator(GeneratorConfig(scale=10, syncs=3, seed=4, keep_all_obs=True, horizon=4))
        for _ in sim2.run():
            pass
        path = write_extract(tmp_path, t, sim2.sync_time(3), sim2.current_columns(t), extracted_by="qa-export")
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        got = {int(r[get_table(t).key[0]]) for r in rows}
        assert list(rows[0])[-2:] == ["extracted_at", "extracted_by"]
        assert all(r["extracted_by"] == "qa-export" for r in rows)
        state = rebuilt(batches[t], t)
        assert got == {k for k, v in state.items() if v[-1][1] == TMAX}


def test_obs_raw_extracts_need_the_full_state():
    sim = SourceSimulator(GeneratorConfig(scale=5, syncs=4, seed=1, horizon=1))
    for _ in sim.run():
        pass
    with pytest.raises(ValueError, match="keep_all_obs"):
        sim.current_columns(OBS_RAW.name)


def test_generate_refuses_unknown_or_inconsistent_tables(tmp_path):
    with pytest.raises(ValueError, match="unknown tables"):
        generate(tmp_path, GeneratorConfig(scale=2, syncs=1), tables=["meta_nope"])
    with pytest.raises(ValueError, match="extract tables"):
        generate(tmp_path, GeneratorConfig(scale=2, syncs=1), tables=["meta_network"], extract_tables=["meta_vars"])


def test_cli_generate(tmp_path, capsys):
    from lakehistory_tools.cli import main

    root = tmp_path / "cli"
    rc = main(
        [
            "generate",
            "--landing",
            str(root),
            "--scale",
            "5",
            "--syncs",
            "2",
            "--seed",
            "3",
            "--tables",
            "meta_network,meta_station,obs_raw",
            "--extract-tables",
            "meta_station",
            "--compression",
            "gzip",
            "--no-progress",
        ]
    )
    assert rc == 0
    assert (root / "obs_raw" / "000002" / "manifest.json").exists()
    assert (root / "extracts" / "meta_station" / "2024-01-02.csv").exists()
    assert not (root / "meta_history").exists()
    out = capsys.readouterr().out
    assert "obs_raw" in out and "replace" in out


def test_cli_lands_one_sync_and_reports_the_landed_syncs(tmp_path, capsys):
    from lakehistory_tools.cli import main

    root = tmp_path / "cli"
    tables = ["--tables", "meta_network,meta_station", "--extract-tables", "meta_station"]
    common = ["--landing", str(root), "--syncs", "3", *tables]
    gen = ["generate", "--scale", "3", "--seed", "1", "--no-progress", *common]
    for bad in ("0", "4"):
        assert main([*gen, "--sync", bad]) == 2
        assert "--sync must be between 1 and --syncs (3)" in capsys.readouterr().err
    assert not root.exists()
    assert main(["landed", *common]) == 0
    assert capsys.readouterr().out == "0\n"
    for k in (1, 2):
        assert main([*gen, "--sync", str(k)]) == 0
        assert f"sync {k} of 3" in capsys.readouterr().out
    assert sorted(p.name for p in (root / "meta_network").iterdir()) == ["000001", "000002"]
    assert sorted(p.name for p in (root / "extracts" / "meta_station").iterdir()) == [
        "2024-01-01.csv",
        "2024-01-01.sync.json",
        "2024-01-02.csv",
        "2024-01-02.sync.json",
    ]
    assert main(["landed", *common]) == 0
    assert capsys.readouterr().out == "2\n"
    assert main(["landed", *common, "--start-date", "2024-01-02"]) == 0
    assert capsys.readouterr().out == "1\n"  # then sync 2's extract would be 2024-01-03.csv
    assert main([*gen, "--sync", "2"]) == 1  # a batch is landed once
    assert "already landed" in capsys.readouterr().err


def test_cli_domain_json(capsys):
    from lakehistory_tools.cli import main

    assert main(["domain"]) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)["tables"]] == list(TABLE_NAMES)


def test_timestamps_round_trip():
    t = dt.datetime(2024, 3, 1, 12, 30, 15, 123000, tzinfo=UTC)
    assert ms_to_dt(to_ms(t)) == t
    assert to_ms(TMAX) == TMAX_MS
