"""Emulated time travel through dbt on Spark/Delta: as-of answers against the reference model
after every batch, after VACUUM and after cleanup; SQL:2011 forms and Naksha uuids on hand-checked
fixtures; gap-free transaction ids across a failed batch."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import textwrap
import uuid
from pathlib import Path

import pytest
from history_case import SUPERSET, HistoryCase, T, batch, normalize, pad
from history_case import version as fivetran_version
from hypothesis import HealthCheck, Phase, given, settings

from harness import DbtProject, copy_project, examples, unique_schema
from lakehistory.landing.batch import ONE_MS, TMAX, Batch, Column
from oracle.fivetran import apply_batch
from oracle.streams import batch_streams, deleted_column_of, key_columns_of

DATABASE_ID = 0xABCDEF0123  # 40 bits


# Every way a project may write transaction time (var values), the default first.
CONFIGS = {
    "integer_max": {},
    "timestamp_max": {"lakehistory_version_type": "timestamp"},
    "integer_null": {"lakehistory_open_end": "null"},
    "timestamp_null": {"lakehistory_version_type": "timestamp", "lakehistory_open_end": "null"},
    "append_only": {"lakehistory_append_only": True},
}


def set_vars(project: DbtProject, values: dict) -> None:
    """Vars in the project file, before dbt first parses the project: as `--vars` they would make
    every invocation with other vars (or none) parse the whole project again."""
    with (project.project_dir / "dbt_project.yml").open("a") as f:
        f.write("\nvars:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in values.items()))


def configured_project(base: Path, label: str, config: dict) -> DbtProject:
    project = DbtProject(copy_project(base), unique_schema(f"time_travel_{label}"))
    if config:
        set_vars(project, config)
    project.landing.mkdir()
    return project


def write_model(project: DbtProject, name: str, sql: str) -> None:
    (project.project_dir / "models" / "under_test" / f"{name}.sql").write_text(textwrap.dedent(sql))


def as_of_answers(case: HistoryCase, versions: list[str]) -> list[list[dict]]:
    """The table as of each version (SQL literals), through lakehistory.as_of in one dbt model;
    the last answer is lakehistory.current. The versions are written into the model, not passed
    as `--vars`: new vars make dbt parse the whole project again, a new model only that file."""
    name = f"{case.name}_as_of"
    write_model(
        case.project,
        name,
        f"""\
        {{{{ config(materialized='table') }}}}
        {{% for v in {json.dumps(versions)} %}}
        select {{{{ loop.index0 }}}} as `_as_of`, * from {{{{ lakehistory.as_of(ref('{case.name}'), v) }}}}
        union all
        {{% endfor %}}
        select -1 as `_as_of`, * from {{{{ lakehistory.current(ref('{case.name}')) }}}}
        """,
    )
    case.project.run_ok("run", "--select", name)
    answers: list[list[dict]] = [[] for _ in range(len(versions) + 1)]
    for r in case.project.rows(f"select * from {{schema}}.`{name}`"):
        answers[r.pop("_as_of")].append(normalize(r))
    return [sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True)) for rows in answers]


def transactions(project: DbtProject) -> list[dict]:
    return project.rows("select * from {schema}.lakehistory_transactions order by txn_id")


def all_txn_ids(project: DbtProject) -> list[int]:
    return [t["txn_id"] for t in transactions(project)]


# `make test` runs both settings changed at once and append-only (a storage of its own); the
# default, which most other tests build, and the two single changes run in `make test-slow`.
THOROUGH_ONLY = {"integer_max", "timestamp_max", "integer_null"}


@pytest.mark.parametrize(
    "label", [pytest.param(label, marks=pytest.mark.slow) if label in THOROUGH_ONLY else label for label in CONFIGS]
)
def test_as_of_every_version_matches_the_reference_also_after_vacuum_and_cleanup(
    lakehouse: Path, tmp_path_factory: pytest.TempPathFactory, label: str
) -> None:
    project = configured_project(tmp_path_factory.mktemp(label), label, CONFIGS[label])
    timestamps = "timestamp" in label
    counter = iter(range(100))

    def literal(txn: dict, shift_ms: int = 0) -> str:
        """The transaction's version as SQL (for time versions, shifted by some milliseconds)."""
        if not timestamps:
            return str(txn["txn_id"])
        instant = txn["started_at"] + dt.timedelta(milliseconds=shift_ms)
        return f"timestamp'{instant.isoformat(sep=' ')}'"

    @settings(
        max_examples=examples(1, 2) if label == "integer_max" else examples(2, 4) if label == "append_only" else 1,
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(stream=batch_streams(max_batches=4, max_keys=3, max_events=3, composite_key=False))
    def check(stream) -> None:
        stream_columns, key_names, batches = stream
        if label == "append_only":  # Atoti's append-only case: no update, no delete
            batches = appends_only(batches, key_names)
        columns = key_columns_of(stream_columns, key_names) + SUPERSET
        deleted = deleted_column_of(stream_columns) or "deleted"
        case = HistoryCase(project, f"tt_{next(counter)}", columns, key_names, deleted_column=deleted)
        # the state after each of this table's transactions, from the reference model
        states: list[tuple[int, list]] = []
        reference: list = []
        for b in batches:
            padded = pad(b, columns)
            case.land(padded)
            case.run()  # one batch per run: other tables' transactions may come in between
            reference = apply_batch(reference, padded)
            states.append((case.transactions()[-1]["txn_id"], case.expected(reference)))
        txns = transactions(project)
        # every transaction of the project, and for time versions also an instant just before each
        versions = ["0"] if not timestamps else [f"timestamp'{txns[0]['started_at'] - ONE_MS}'"]
        expected = [[]]
        for t in txns:
            if timestamps:
                versions.append(literal(t, -1))
                expected.append(_state_at(states, t["txn_id"] - 1))
            versions.append(literal(t))
            expected.append(_state_at(states, t["txn_id"]))
        answers = as_of_answers(case, versions)
        for v, want, got in zip(versions, expected, answers, strict=False):
            assert got == want, f"as of {v}"
        assert answers[-1] == case.expected(reference), "lakehistory.current"
        if label == "append_only":
            for v, want in zip(versions, expected, strict=False):
                assert valid_from_reader(case, v) == want, f"a reader of valid_from only, as of {v}"

        # Delta's VACUUM removes the files of old table versions; the emulated history stays.
        spark = project.spark
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        spark.sql(f"vacuum {project.table(case.name)} retain 0 hours")
        assert as_of_answers(case, versions) == answers, "VACUUM changed an as-of answer"

        # Cleanup before the table's middle transaction keeps every answer from there on.
        middle = next(t for t in txns if t["txn_id"] == states[len(states) // 2][0])
        cutoff = middle["txn_id"] if not timestamps else middle["started_at"].isoformat(sep=" ")
        project.run_ok(
            "run-operation", "lakehistory.cleanup", "--args", json.dumps({"model": case.name, "before_version": cutoff})
        )
        keep = [i for i, v in enumerate(versions) if i > 0 and versions.index(literal(middle)) <= i]
        after = as_of_answers(case, [versions[i] for i in keep])
        assert after[:-1] == [answers[i] for i in keep], "cleanup changed an answer at or after its cutoff"
        assert after[-1] == answers[-1], "cleanup touched a current row"
        ids = all_txn_ids(project)
        assert ids == list(range(1, len(ids) + 1)), "transaction ids have a gap"

    check()


def appends_only(batches: list[Batch], key: list[str]) -> list[Batch]:
    """The stream as a source that only ever adds rows sends it: each batch keeps the rows of the
    keys no earlier batch had (several versions of a new key, and its delete, may come in one
    batch), without truncates or schema changes; empty batches are left out."""
    seen: set[tuple] = set()
    kept: list[Batch] = []

    def new(rows: list[dict]) -> list[dict]:
        return [r for r in rows if tuple(r[k] for k in key) not in seen]

    for b in batches:
        earliest = None if b.earliest is None else new(b.earliest)
        rows = [*new(b.replace), *new(b.update), *new(b.delete), *(earliest or [])]
        if not rows:
            continue
        n = len(kept) + 1
        kept.append(
            dataclasses.replace(
                b, batch_id=f"{n:06d}", sequence=n, replace=new(b.replace), update=new(b.update),
                delete=new(b.delete), earliest=earliest, truncate=None, schema_changes=[],
            )
        )  # fmt: skip
        seen |= {tuple(r[k] for k in key) for r in rows}
    return kept


def valid_from_reader(case: HistoryCase, version: str) -> list[dict]:
    """Atoti's reader of an append-only table, from the seed's text: the column valid_from "states
    from which version the row is valid, where valid_from is inclusive", and there is no valid_to.
    So as of version v the table is every row with valid_from <= v, and nothing else is read."""
    return case.expected(case.project.rows(f"select * from {{schema}}.`{case.name}` where valid_from <= {version}"))


def test_an_append_only_table_refuses_a_batch_that_would_update_or_delete_a_row(
    lakehouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Atoti's append-only case allows no update and no delete: a batch that brings a new version
    of a key an earlier batch wrote (or deletes it) is refused, naming the batch and the key, and
    the table stays as it was; rows that only add (new keys, several versions of a new key in one
    batch) go in once each, so a reader of valid_from alone reads them right."""
    project = configured_project(tmp_path_factory.mktemp("append_refusal"), "append_refusal", CONFIGS["append_only"])
    columns = [Column("id", "bigint"), Column("name", "string")]
    case = HistoryCase(project, "gauges", columns, ["id"])
    first = [
        fivetran_version(T(1), T(2) - ONE_MS, id=1, name="a"),
        fivetran_version(T(2), id=1, name="b"),
        fivetran_version(T(1), id=2, name="c"),
    ]
    case.land(batch("gauges", columns, "id", 1, "alice", first))
    case.run()
    stored = case.project.rows("select * from {schema}.gauges order by id, _fivetran_start")
    assert [(r["id"], r["name"], r["valid_from"]) for r in stored] == [(1, "a", 1), (1, "b", 1), (2, "c", 1)]
    case.land(batch("gauges", columns, "id", 2, "bob", [fivetran_version(T(3), id=2, name="d")]))
    message = case.run_fails()
    assert "Batch 000002 of gauges" in message and "key [2]" in message and "append-only" in message, message
    assert case.project.rows("select * from {schema}.gauges order by id, _fivetran_start") == stored


def _state_at(states: list[tuple[int, list]], txn_id: int) -> list:
    known = [state for txn, state in states if txn <= txn_id]
    return known[-1] if known else []


# --- SQL:2011 forms on hand-checked fixtures ---------------------------------------------------

OPEN = 9223372036854775807
TT_PERIODS = f"""id,valid_from,valid_to
1,1,3
2,3,{OPEN}
3,5,7
4,1,{OPEN}
"""
VT_PERIODS = f"""id,valid_from,valid_to,_fivetran_start,_fivetran_end
1,1,{OPEN},2024-01-01 10:00:00,2024-01-01 11:59:59.999
2,1,{OPEN},2024-01-01 12:00:00,9999-12-31 23:59:59.999
3,1,{OPEN},2024-01-01 09:00:00,2024-01-01 12:00:00
4,1,2,2024-01-01 10:00:00,2024-01-01 11:59:59.999
"""
CFG_PERIODS = """id,v_start,v_end
1,1,3
2,3,
3,5,7
4,1,
"""
KEY_PERIODS = """id,k,at,gone
1,a,1,false
2,a,3,false
3,a,6,true
4,b,2,false
5,a,8,false
"""
KEYED = "{'valid_from': 'at', 'key': 'k', 'removed': 'gone'}"
H = "timestamp'2024-01-01 {}'"
FORMS = {
    # transaction clock, half-open [valid_from, valid_to)
    "tt as_of 3": ("tt_periods", "'as_of', 3", {2, 4}),
    "tt as_of 2": ("tt_periods", "'as_of', 2", {1, 4}),
    "tt from_to 3 5": ("tt_periods", "'from_to', 3, 5", {2, 4}),
    "tt between 3 5": ("tt_periods", "'between', 3, 5", {2, 3, 4}),
    "tt contained_in 3 7": ("tt_periods", "'contained_in', 3, 7", {3}),
    "tt contained_in 1 3": ("tt_periods", "'contained_in', 1, 3", {1}),
    "tt all": ("tt_periods", "'all'", {1, 2, 3, 4}),
    # valid clock, closed [_fivetran_start, _fivetran_end], rows known now
    "vt as_of 12:00": ("vt_periods", f"'as_of', \"{H.format('12:00:00')}\", clock='valid'", {2, 3}),
    "vt as_of 11:59:59.999": ("vt_periods", f"'as_of', \"{H.format('11:59:59.999')}\", clock='valid'", {1, 3}),
    "vt from_to 11 12": (
        "vt_periods",
        f"'from_to', \"{H.format('11:00:00')}\", \"{H.format('12:00:00')}\", clock='valid'",
        {1, 3},
    ),
    "vt between 11 12": (
        "vt_periods",
        f"'between', \"{H.format('11:00:00')}\", \"{H.format('12:00:00')}\", clock='valid'",
        {1, 2, 3},
    ),
    "vt contained_in 10 12": (
        "vt_periods",
        f"'contained_in', \"{H.format('10:00:00')}\", \"{H.format('12:00:00')}\", clock='valid'",
        {1},
    ),
    "vt all": ("vt_periods", "'all', clock='valid'", {1, 2, 3}),
    "vt all known at 1": ("vt_periods", "'all', clock='valid', version=1", {1, 2, 3, 4}),
    # a start only, named by the argument: valid until the key's next row, `gone` rows end a key
    "key as_of 1": ("key_periods", f"'as_of', 1, period={KEYED}", {1}),
    "key as_of 3": ("key_periods", f"'as_of', 3, period={KEYED}", {2, 4}),
    "key as_of 6": ("key_periods", f"'as_of', 6, period={KEYED}", {4}),
    "key from_to 3 6": ("key_periods", f"'from_to', 3, 6, period={KEYED}", {2, 4}),
    "key between 6 8": ("key_periods", f"'between', 6, 8, period={KEYED}", {4, 5}),
    "key contained_in 1 6": ("key_periods", f"'contained_in', 1, 6, period={KEYED}", {1, 2}),
    "key all": ("key_periods", f"'all', period={KEYED}", {1, 2, 4, 5}),
    # a start only and no key (Atoti's append-only table): every row valid for ever
    "append as_of 2": ("key_periods", "'as_of', 2, period={'valid_from': 'at'}", {1, 4}),
}
# the tt periods with NULL open ends, in columns the seed's config names (meta.lakehistory.period):
# every tt case, the same answer
FORMS |= {
    "cfg" + label[2:]: ("cfg_periods", args, ids) for label, (seed, args, ids) in FORMS.items() if seed == "tt_periods"
}
# as_of and current over the same periods (any other relation keeps all its columns)
READS = {
    "as_of cfg 3": ("lakehistory.as_of(ref('cfg_periods'), 3)", {2, 4}),
    "current cfg": ("lakehistory.current(ref('cfg_periods'))", {2, 4}),
    "as_of key 7": (f"lakehistory.as_of(ref('key_periods'), 7, period={KEYED})", {4}),
    "current key": (f"lakehistory.current(ref('key_periods'), period={KEYED})", {4, 5}),
}


UUID_CASES = [  # object id, instant, object type
    (1, "2000-01-01 00:00:00", 0),
    (4095, "2026-11-21 13:45:00", 0),
    (4096, "2024-02-29 23:59:59", 1),
    (2**60 - 1, "3023-12-31 12:00:00", 7),
]


def test_sql_2011_forms_and_naksha_uuids(dbt_project: DbtProject) -> None:
    set_vars(dbt_project, {"lakehistory_database_id": DATABASE_ID})
    seeds = dbt_project.project_dir / "seeds"
    (seeds / "tt_periods.csv").write_text(TT_PERIODS)
    (seeds / "vt_periods.csv").write_text(VT_PERIODS)
    (seeds / "cfg_periods.csv").write_text(CFG_PERIODS)
    (seeds / "key_periods.csv").write_text(KEY_PERIODS)
    (seeds / "uuid_inputs.csv").write_text(
        "object_id,at,object_type\n" + "".join(f"{i},{at},{t}\n" for i, at, t in UUID_CASES)
    )
    (seeds / "_fixtures.yml").write_text(
        json.dumps(
            {
                "version": 2,
                "seeds": [
                    {
                        "name": "tt_periods",
                        "config": {"column_types": {"id": "int", "valid_from": "bigint", "valid_to": "bigint"}},
                    },
                    {
                        "name": "vt_periods",
                        "config": {
                            "column_types": {
                                "id": "int",
                                "valid_from": "bigint",
                                "valid_to": "bigint",
                                "_fivetran_start": "timestamp",
                                "_fivetran_end": "timestamp",
                            }
                        },
                    },
                    {
                        "name": "cfg_periods",
                        "config": {
                            "column_types": {"id": "int", "v_start": "bigint", "v_end": "bigint"},
                            "meta": {"lakehistory": {"period": {"valid_from": "v_start", "valid_to": "v_end"}}},
                        },
                    },
                    {
                        "name": "key_periods",
                        "config": {"column_types": {"id": "int", "k": "string", "at": "bigint", "gone": "boolean"}},
                    },
                    {
                        "name": "uuid_inputs",
                        "config": {"column_types": {"object_id": "bigint", "at": "timestamp", "object_type": "int"}},
                    },
                ],
            }
        )
    )
    models = dbt_project.project_dir / "models" / "under_test"
    models.mkdir(parents=True, exist_ok=True)
    (models / "forms.sql").write_text(
        "\nunion all\n".join(
            f"select '{label}' as form, id from {{{{ lakehistory.history(ref('{seed}'), {args}) }}}}"
            for label, (seed, args, _) in FORMS.items()
        )
        + "\nunion all\n"
        + "\nunion all\n".join(
            f"select '{label}' as form, id from {{{{ {call} }}}}" for label, (call, _) in READS.items()
        )
    )
    (models / "uuids.sql").write_text(
        "select object_id, at, object_type, u, {{ lakehistory.naksha_uuid_fields('u') }} as fields\n"
        "from (select *, {{ lakehistory.naksha_uuid('object_id', 'at', 'object_type') }} as u\n"
        "      from {{ ref('uuid_inputs') }})"
    )
    dbt_project.run_ok(
        "build",
        "--select",
        "tt_periods",
        "vt_periods",
        "cfg_periods",
        "key_periods",
        "uuid_inputs",
        "forms",
        "uuids",
    )

    found: dict[str, set[int]] = {label: set() for label in [*FORMS, *READS]}
    for r in dbt_project.rows("select form, id from {schema}.forms"):
        found[r["form"]].add(r["id"])
    assert found == {label: expected for label, (_, _, expected) in FORMS.items()} | {
        label: expected for label, (_, expected) in READS.items()
    }

    # A period that names no start, or a table with none to find: errors that say what to write.
    no_start = "{{ lakehistory.history(ref('key_periods'), 'all', period={'start': 'at'}) }}"
    bad = dbt_project.run_fails("compile", "--inline", f"select * from {no_start}")
    assert "key_periods" in bad and "a period needs valid_from" in bad and "'start'" in bad, bad
    none = dbt_project.run_fails("compile", "--inline", "select * from {{ lakehistory.as_of(ref('uuid_inputs'), 1) }}")
    assert "uuid_inputs" in none and "no period known" in none and "meta.lakehistory.period" in none, none

    rows = dbt_project.rows("select * from {schema}.uuids order by object_id")
    assert len(rows) == len(UUID_CASES)
    for r in rows:
        fields = decode(r["u"])
        at = r["at"]
        expected = {
            "object_id": r["object_id"],
            "year": at.year,
            "month": at.month,
            "day": at.day,
            "object_type": r["object_type"],
            "database_id": DATABASE_ID,
        }
        assert fields == expected, r["u"]
        assert r["fields"] == expected, "naksha_uuid_fields disagrees with the bit layout"
        assert uuid.UUID(r["u"]).version == 4 and uuid.UUID(r["u"]).variant == uuid.RFC_4122


def decode(text: str) -> dict[str, int]:
    """Naksha's layout (seed 002), read bit by bit: the test's own oracle."""
    value = uuid.UUID(text).int
    high, low = value >> 64, value & (2**64 - 1)
    return {
        "object_id": ((high >> 16) << 12) | (high & 0xFFF),
        "year": 2000 + ((low >> 52) & 0x3FF),
        "month": (low >> 48) & 0xF,
        "day": (low >> 43) & 0x1F,
        "object_type": (low >> 40) & 0x7,
        "database_id": low & (2**40 - 1),
    }


# --- gap-free transaction ids ------------------------------------------------------------------

COLS = [Column("id", "bigint"), Column("name", "string")]
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def version(id_: int, name: str, start: dt.datetime) -> dict:
    return {
        "id": id_,
        "name": name,
        "_fivetran_start": start,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": start,
    }


def test_failed_batch_leaves_no_gap_and_uuids_decode(dbt_project: DbtProject) -> None:
    dbt_project.landing.mkdir()
    set_vars(dbt_project, {"lakehistory_database_id": DATABASE_ID})
    case = HistoryCase(dbt_project, "ledger", COLS, ["id"])
    base = Batch(table="ledger", batch_id="000001", sequence=1, key=["id"], columns=COLS)
    case.land(dataclasses.replace(base, replace=[version(1, "a", T0)], earliest=[]))
    case.run()
    # a second version at a start the table holds, without an earliest start: the merge refuses it
    clash = dataclasses.replace(base, batch_id="000002", sequence=2, replace=[version(1, "b", T0)], earliest=[])
    case.land(clash)
    error = case.run_fails()
    assert "000002" in error and "This batch and the later ones were not applied" in error
    assert all_txn_ids(dbt_project) == [1]
    # the corrected batch (it says where the key's new history starts) gets the next id
    fixed = dataclasses.replace(clash, earliest=[{"id": 1, "_fivetran_start": T0}])
    for path in (dbt_project.landing / "ledger" / "000002").iterdir():
        path.unlink()
    case.land(fixed)
    case.land(
        dataclasses.replace(base, batch_id="000003", sequence=3, replace=[version(2, "c", T0 + ONE_MS)], earliest=[])
    )
    case.run()
    txns = dbt_project.rows("select * from {schema}.lakehistory_transactions order by txn_id")
    assert [(t["txn_id"], t["batch_id"]) for t in txns] == [(1, "000001"), (2, "000002"), (3, "000003")]
    for t in txns:
        started = t["started_at"]
        assert decode(t["txn_uuid"]) == {
            "object_id": t["txn_id"],
            "year": started.year,
            "month": started.month,
            "day": started.day,
            "object_type": 0,
            "database_id": DATABASE_ID,
        }


def test_transactions_table_of_an_earlier_layout_is_refused(dbt_project: DbtProject) -> None:
    dbt_project.landing.mkdir()
    case = HistoryCase(dbt_project, "ledger", COLS, ["id"])
    spark = dbt_project.spark
    spark.sql(f"create schema if not exists `{dbt_project.schema}`")
    spark.sql(  # the first release's layout: no operation, no rows_purged
        f"create table {dbt_project.table('lakehistory_transactions')} (txn_id bigint, txn_uuid string, "
        "source_table string, history_table string, batch_id string, batch_sequence bigint) using delta"
    )
    case.land(
        Batch(table="ledger", batch_id="000001", sequence=1, key=["id"], columns=COLS, replace=[version(1, "a", T0)])
    )
    error = case.run_fails()
    assert "made by an earlier version of lakehistory" in error and "lakehistory_transactions" in error
    assert not case.exists() or case.physical_rows() == []


def test_the_transactions_table_is_checked_once_per_dbt_invocation(
    dbt_project: DbtProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every node of a run asks for the transactions table; the first answer holds for the rest of
    the invocation, and a new invocation checks again."""
    from lakehistory import invocation as invocations
    from lakehistory.history import ledger, transactions

    spark, relation = dbt_project.spark, dbt_project.table("lakehistory_transactions")
    spark.sql(f"create schema if not exists `{dbt_project.schema}`")
    checks: list[str] = []
    create = transactions.create_if_missing
    monkeypatch.setattr(
        ledger, "create_if_missing", lambda spark, made, sql: checks.append(made) or create(spark, made, sql)
    )
    for invocation in ("first", "first", "first", "second"):
        ledger.ensure_transactions_table(spark, relation, invocations.of(invocation))
    assert checks == [relation, transactions.syncs_relation(relation)] * 2
    assert spark.table(relation).columns == list(transactions.TABLE_COLUMNS)
