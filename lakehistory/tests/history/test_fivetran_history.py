"""The fivetran_history strategy through dbt on Spark/Delta, against hand-checked tables (the
seed's worked examples as the spec corrects them) and against the reference model."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from pathlib import Path

import pytest
from history_case import OPEN, SUPERSET, HistoryCase, pad
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import DbtProject, copy_project, unique_schema
from lakehistory.landing.batch import ONE_MS, TMAX, UNMODIFIED, Batch, Column, SchemaChange, Truncate
from lakehistory.names import EARLIEST, START
from oracle.fivetran import apply_batch
from oracle.streams import batch_streams, deleted_column_of, key_columns_of

BASE = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
COLS = [Column("id", "bigint"), Column("col1", "string"), Column("col2", "bigint")]


def T(n: float) -> dt.datetime:  # noqa: N802 - the seed's T1, T2, ...
    return BASE + dt.timedelta(hours=n)


def row(id_, col1, col2, start, end, active, synced, **extra):
    return {
        "id": id_,
        "col1": col1,
        "col2": col2,
        START: start,
        "_fivetran_end": end,
        "_fivetran_active": active,
        "_fivetran_synced": synced,
        **extra,
    }


def batch(n: int, **rows) -> Batch:
    return Batch(table="t", batch_id=f"{n:06d}", sequence=n, key=["id"], columns=COLS, **rows)


@pytest.fixture(scope="module")
def project(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("history")), unique_schema("history"))
    project.landing.mkdir()
    return project


def fresh(project: DbtProject, name: str, columns=COLS, key=("id",), deleted_column=None) -> HistoryCase:
    return HistoryCase(project, f"{name}", columns, key, deleted_column)


# --- the seed's worked examples (spec-corrected expectations, written by hand) ---------------

INITIAL = [
    row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
    row(1, "pqr", 2, T(2), TMAX, True, T(101)),
    row(2, "mno", 3, T(2), TMAX, True, T(103)),
]


def test_seed_replace_example_1(project: DbtProject) -> None:
    case = fresh(project, "seed_replace_1")
    case.land(batch(1, replace=INITIAL, earliest=[]))
    case.land(
        batch(
            2,
            replace=[
                row(1, "def", 1, T(3), T(4) - ONE_MS, False, T(104), **{EARLIEST: True}),
                row(1, "ghi", 1, T(4), TMAX, True, T(105), **{EARLIEST: False}),
            ],
        ),
        earliest_form="column",
    )
    case.run()
    assert case.fivetran_rows() == case.expected(
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(3) - ONE_MS, False, T(101)),
            row(2, "mno", 3, T(2), TMAX, True, T(103)),  # the seed wrongly moves id 2
            row(1, "def", 1, T(3), T(4) - ONE_MS, False, T(104)),
            row(1, "ghi", 1, T(4), TMAX, True, T(105)),
        ]
    )


def test_seed_replace_example_2(project: DbtProject) -> None:
    case = fresh(project, "seed_replace_2")
    case.land(
        batch(
            1,
            replace=[
                row(1, "xyz", 4, T(1), T(3) - ONE_MS, False, T(100)),
                row(1, "abc", 1, T(3), T(4) - ONE_MS, False, T(100)),
                row(1, "pqr", 2, T(4), TMAX, True, T(101)),
                row(2, "mno", 3, T(4), TMAX, True, T(103)),
            ],
            earliest=[],
        )
    )
    case.land(batch(2, replace=[row(1, "ghi", 1, T(2), TMAX, True, T(104))], earliest=[{"id": 1, START: T(2)}]))
    case.run()
    assert case.fivetran_rows() == case.expected(
        [
            row(1, "xyz", 4, T(1), T(3) - ONE_MS, False, T(100)),  # inactive rows are never touched (rule 8)
            row(1, "ghi", 1, T(2), TMAX, True, T(104)),
            row(2, "mno", 3, T(4), TMAX, True, T(103)),
        ]
    )
    first, second = (t["txn_id"] for t in case.transactions())
    closed = [r for r in case.physical_rows() if r["valid_to"] != OPEN]
    assert sorted((r["col1"], r["valid_from"], r["valid_to"]) for r in closed) == [
        ("abc", first, second),
        ("pqr", first, second),
    ], "the overlap delete closes rows in transaction time instead of destroying them"


def test_seed_updates_example(project: DbtProject) -> None:
    case = fresh(project, "seed_updates")
    case.land(batch(1, replace=INITIAL, earliest=[]))
    case.land(
        batch(
            2,
            update=[
                row(1, "xyz", UNMODIFIED, T(3), T(5) - ONE_MS, False, T(107), **{EARLIEST: True}),
                row(2, UNMODIFIED, 1000, T(4), TMAX, True, T(108), **{EARLIEST: True}),
                row(1, "def", UNMODIFIED, T(5), TMAX, True, T(109), **{EARLIEST: False}),
            ],
        ),
        earliest_form="column",
    )
    case.run()
    assert case.fivetran_rows() == case.expected(
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(3) - ONE_MS, False, T(101)),
            row(2, "mno", 3, T(2), T(4) - ONE_MS, False, T(103)),
            row(1, "xyz", 2, T(3), T(5) - ONE_MS, False, T(107)),
            row(1, "def", 2, T(5), TMAX, True, T(109)),
            row(2, "mno", 1000, T(4), TMAX, True, T(108)),
        ]
    )


def test_seed_deletes_example(project: DbtProject) -> None:
    case = fresh(project, "seed_deletes")
    case.land(batch(1, replace=INITIAL, earliest=[]))
    case.land(batch(2, delete=[{"id": 1, "_fivetran_end": T(3)}]))
    case.run()
    assert case.fivetran_rows() == case.expected(
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(3), False, T(101)),  # the delete time, no -1 ms (rule 11)
            row(2, "mno", 3, T(2), TMAX, True, T(103)),
        ]
    )
    (txn,) = [t for t in case.transactions() if t["batch_id"] == "000002"]
    assert (txn["versions_opened"], txn["versions_closed"], txn["rows_in"]) == (1, 1, 1)


def test_an_update_without_a_previous_version_is_ignored_in_every_batch(project: DbtProject) -> None:
    """Rule 10: an update for a key with no previous version is ignored, in a new table's first
    batch as in any later one; it is no previous version for the key's later updates either."""
    case = fresh(project, "orphan_updates")
    first = batch(
        1,
        replace=[row(1, "abc", 1, T(1), T(3) - ONE_MS, False, T(100))],
        update=[
            row(2, "lone", UNMODIFIED, T(2), T(4) - ONE_MS, False, T(100)),  # key 2 has no version
            row(2, UNMODIFIED, 7, T(4), TMAX, True, T(100)),  # nor after the ignored one
            row(1, UNMODIFIED, 5, T(3), TMAX, True, T(100)),
        ],
        earliest=[],
    )
    second = batch(
        2,
        update=[
            row(3, UNMODIFIED, UNMODIFIED, T(5), TMAX, True, T(101)),
            row(1, "xyz", UNMODIFIED, T(6), TMAX, True, T(101)),
        ],
        earliest=[{"id": 3, START: T(5)}, {"id": 1, START: T(6)}],
    )
    only_orphans = fresh(project, "only_orphan_updates")
    only_orphans.land(batch(1, update=[row(4, "x", UNMODIFIED, T(1), TMAX, True, T(100))], earliest=[]))
    case.land(first)
    case.land(second)
    case.run()
    expected = [
        row(1, "abc", 1, T(1), T(3) - ONE_MS, False, T(100)),
        row(1, "abc", 5, T(3), T(6) - ONE_MS, False, T(100)),
        row(1, "xyz", 5, T(6), TMAX, True, T(101)),
    ]
    assert case.fivetran_rows() == case.expected(expected)
    assert case.fivetran_rows() == case.expected(apply_batch(apply_batch([], first), second)), "the reference agrees"
    # batch 2 opens key 1's new version and the closed copy of the one before it; key 3 nothing
    assert [(t["batch_id"], t["versions_opened"]) for t in case.transactions()] == [("000001", 2), ("000002", 2)]
    only_orphans.run()
    assert only_orphans.exists() and only_orphans.fivetran_rows() == []
    assert [t["batch_id"] for t in only_orphans.transactions()] == ["000001"]


def test_a_column_the_source_declares_not_null_is_not_null_in_the_history(project: DbtProject) -> None:
    """Seed 001: non-null constraints of the source are maintained in the history. A `not_null`
    constraint on a source column makes the history table's column NOT NULL; a batch with a NULL
    there is refused, naming the batch, file, row and column, and nothing of it is applied; an
    unmodified cell inherits its value; a schema change that drops the column is refused."""
    case = HistoryCase(project, "declared_not_null", COLS, ["id"], not_null=["col1"])
    versions = [row(1, "abc", 1, T(1), TMAX, True, T(100)), row(2, "mno", None, T(1), TMAX, True, T(100))]
    first = batch(1, replace=versions)
    case.land(first)
    case.land(batch(2, update=[row(1, UNMODIFIED, 5, T(2), TMAX, True, T(101))], earliest=[]))
    case.run()
    nullable = {f.name: f.nullable for f in project.spark.table(f"`{project.schema}`.declared_not_null").schema}
    assert (nullable["col1"], nullable["col2"]) == (False, True), nullable
    before = (case.fivetran_rows(), case.transactions())
    assert sorted(r["col1"] for r in before[0]) == ["abc", "abc", "mno"], "an unmodified cell inherits its value"

    case.land(
        batch(
            3,
            replace=[row(3, "pqr", 3, T(3), TMAX, True, T(102))],
            update=[row(1, "xyz", 6, T(3), TMAX, True, T(102)), row(2, None, UNMODIFIED, T(3), TMAX, True, T(102))],
            earliest=[],
        )
    )
    error = case.run_fails()
    assert "000003" in error and "data row 2: column col1 is NULL, and the source declares it not_null" in error, error
    assert (case.fivetran_rows(), case.transactions()) == before, "nothing of the refused batch is applied"

    dropping = HistoryCase(project, "declared_not_null_dropped", COLS, ["id"], not_null=["col1"])
    dropping.land(dataclasses.replace(first, table="declared_not_null_dropped"))
    dropping.land(batch(2, schema_changes=[SchemaChange("drop_column", "col1", T(2))]))
    error = dropping.run_fails()
    assert "000002" in error and "drops column col1, which the source declares not_null" in error, error
    assert not dropping.exists(), "nothing is applied: the first batch waits with the refused one"


# --- random streams against the reference model -------------------------------------------

WRITER_OPTIONS = st.fixed_dictionaries(
    {
        "file_format": st.sampled_from(["csv", "parquet"]),
        "compression": st.sampled_from(["none", "gzip", "zstd"]),
        "earliest_form": st.sampled_from(["file", "column"]),
    }
)


# About ten minutes of dbt runs: behind the `slow` marker (`make test-slow`), outside CI's time budget.
@pytest.mark.slow
@pytest.mark.parametrize("composite", [False, True], ids=["single_key", "composite_key"])
def test_random_streams_match_the_reference_after_every_batch(project: DbtProject, composite: bool) -> None:
    counter = iter(range(1000))

    @settings(
        max_examples=4,
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # each step is a dbt run: report, don't shrink
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        stream=batch_streams(max_batches=3, max_keys=3, max_events=3, composite_key=composite),
        options=st.lists(WRITER_OPTIONS, min_size=3, max_size=3),
        data=st.data(),
    )
    def check(stream, options, data) -> None:
        columns, key_names, batches = stream
        batches = with_schema_changes(batches, data.draw)
        table_columns = key_columns_of(columns, key_names) + SUPERSET
        case = fresh(
            project,
            f"stream_{'c' if composite else 's'}_{next(counter)}",
            table_columns,
            key_names,
            deleted_column=deleted_column_of(columns) or "deleted",
        )
        reference: list = []
        previous = None
        for batch_, writer_options in zip(batches, options, strict=False):
            padded = pad(batch_, table_columns)
            before = case.physical_rows()
            case.land(padded, rng=random.Random(batch_.sequence), **writer_options)  # columns shuffled per file
            case.run()
            reference = apply_batch(reference, padded)
            assert case.fivetran_rows() == case.expected(reference), f"after batch {batch_.batch_id}"
            if previous is not None and same_content(previous, padded):
                assert case.physical_rows() == before, f"re-delivered batch {batch_.batch_id} changed the table"
            previous = padded
        sequences = [t["batch_sequence"] for t in case.transactions()]
        assert sequences == list(range(1, len(batches) + 1)), "every batch applied once, in order"

    check()


# Columns a random schema change adds or drops, with the defaults an add may bring.
MIGRATABLE = {"s_text": ["dflt", ""], "n_big": [0, -7], "b_flag": [True, False], "_fivetran_note": ["x", ""]}


def with_schema_changes(batches: list[Batch], draw) -> list[Batch]:
    """Some batches get one or two schema changes (rule 17) at an instant near their rows' starts:
    equal to one, 1 ms before or after it. A re-delivered batch repeats its original's changes."""
    out: list[Batch] = []
    for b in batches:
        if out and same_content(out[-1], b):
            out.append(dataclasses.replace(b, schema_changes=list(out[-1].schema_changes)))
            continue
        starts = sorted({r[START] for r in b.replace + b.update}) or [BASE]
        changes = []
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            column = draw(st.sampled_from(sorted(MIGRATABLE)))
            at = draw(st.sampled_from(starts)) + draw(st.sampled_from([-ONE_MS, dt.timedelta(0), ONE_MS]))
            if draw(st.booleans()):
                default = draw(st.sampled_from([None, *MIGRATABLE[column]]))
                kind = next(c.type for c in SUPERSET if c.name == column)
                changes.append(SchemaChange("add_column", column, at, type=kind, default=default))
            else:
                changes.append(SchemaChange("drop_column", column, at))
        out.append(dataclasses.replace(b, schema_changes=changes))
    return out


def same_content(a: Batch, b: Batch) -> bool:
    fields = ("replace", "update", "delete", "earliest", "deleted_column", "null_string", "unmodified_string")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def test_redelivered_batch_and_rerun_change_nothing(project: DbtProject) -> None:
    case = fresh(project, "redelivery")
    case.land(batch(1, replace=INITIAL, earliest=[]))
    second = batch(2, update=[row(2, UNMODIFIED, 1000, T(4), TMAX, True, T(108))], earliest=[{"id": 2, START: T(4)}])
    case.land(second)
    case.run()
    applied = case.physical_rows()
    case.run()  # nothing new landed: no batch is applied twice
    assert case.physical_rows() == applied and len(case.transactions()) == 2
    case.land(dataclasses.replace(second, batch_id="000003", sequence=3))  # the same content again
    case.run()
    assert case.physical_rows() == applied, "a re-delivered batch opens and closes nothing"
    last = case.transactions()[-1]
    assert (last["batch_id"], last["versions_opened"], last["versions_closed"]) == ("000003", 0, 0)


def test_a_table_of_key_columns_only(project: DbtProject) -> None:
    """A link table (a station's sensors): its key is all it has, no data column. Links come,
    go and come back, and the table follows the reference after every batch."""
    columns = [Column("station_id", "bigint"), Column("sensor_id", "bigint")]
    key = ["station_id", "sensor_id"]
    case = fresh(project, "links", columns, key)

    def link(station: int, sensor: int, start: float, synced: float) -> dict:
        return {"station_id": station, "sensor_id": sensor, START: T(start), "_fivetran_end": TMAX,
                "_fivetran_active": True, "_fivetran_synced": T(synced)}  # fmt: skip

    def earliest(*rows: dict) -> list[dict]:
        return [{"station_id": r["station_id"], "sensor_id": r["sensor_id"], START: r[START]} for r in rows]

    first = [link(1, 10, 1, 100), link(1, 11, 1, 100)]
    again = link(1, 11, 3, 102)
    batches = [
        Batch("t", "000001", 1, key, columns, replace=first, earliest=earliest(*first)),
        Batch(
            "t",
            "000002",
            2,
            key,
            columns,
            replace=[link(2, 10, 2, 101)],
            earliest=earliest(link(2, 10, 2, 101)),
            delete=[{"station_id": 1, "sensor_id": 11, "_fivetran_end": T(2)}],
        ),  # fmt: skip
        Batch("t", "000003", 3, key, columns, replace=[again], earliest=earliest(again)),
    ]
    reference: list = []
    for b in batches:
        case.land(b)
        case.run()
        reference = apply_batch(reference, b)
        assert case.fivetran_rows() == case.expected(reference), f"after batch {b.batch_id}"
    assert [t["versions_opened"] for t in case.transactions()] == [2, 2, 1]


# --- truncates (rules 15, 16): hand-written expectations ------------------------------------


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_truncate_before_a_cutoff(project: DbtProject, mode: str) -> None:
    case = fresh(project, f"truncate_{mode}")
    case.land(batch(1, replace=INITIAL, earliest=[]))  # synced T100 (id 1, closed), T101 (id 1), T103 (id 2)
    case.land(batch(2, truncate=Truncate(mode, T(102))))
    case.run()
    if mode == "hard":  # rule 15: every row synced before the cutoff goes, all versions
        expected = [row(2, "mno", 3, T(2), TMAX, True, T(103))]
    else:  # rule 16: active rows synced before the cutoff end at the cutoff; others stay
        expected = [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(102), False, T(101)),
            row(2, "mno", 3, T(2), TMAX, True, T(103)),
        ]
    assert case.fivetran_rows() == case.expected(expected)
    assert case.fivetran_rows() == case.expected(
        apply_batch(apply_batch([], batch(1, replace=INITIAL, earliest=[])), batch(2, truncate=Truncate(mode, T(102))))
    )


# --- history-mode schema changes (rule 17): hand-written expectations ------------------------


def test_add_column_copies_active_rows_at_its_instant(project: DbtProject) -> None:
    """col3 is declared nowhere but in the batch that adds it: the table gains it, active rows
    that started before T get a copy at T with the default, rows starting after T are untouched,
    a later file carries the column and inherits it through unmodified_string."""
    case = fresh(project, "add_column")
    first = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5)),
        row(1, "b", 2, T(2), TMAX, True, T(6)),
        row(2, "c", 3, T(9), TMAX, True, T(9)),
    ]
    add = SchemaChange("add_column", "col3", T(5), type="string", default="dflt")
    case.land(batch(1, replace=first, earliest=[]))
    case.run()  # the table exists without col3; the next run adds it
    case.land(batch(2, schema_changes=[add]))
    with_col3 = COLS + [Column("col3", "string")]
    later = row(1, "z", UNMODIFIED, T(6), TMAX, True, T(10), col3=UNMODIFIED)
    case.land(dataclasses.replace(batch(3, update=[later]), columns=with_col3))
    case.run()
    expected = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5), col3=None),
        row(1, "b", 2, T(2), T(5) - ONE_MS, False, T(6), col3=None),
        row(1, "b", 2, T(5), T(6) - ONE_MS, False, T(6), col3="dflt"),
        row(1, "z", 2, T(6), TMAX, True, T(10), col3="dflt"),
        row(2, "c", 3, T(9), TMAX, True, T(9), col3=None),
    ]
    assert case.fivetran_rows() == case.expected(expected, with_col3)
    reference = apply_batch(
        apply_batch(apply_batch([], batch(1, replace=first, earliest=[])), batch(2, schema_changes=[add])),
        dataclasses.replace(batch(3, update=[later]), columns=with_col3),
    )
    assert case.fivetran_rows() == case.expected(reference, with_col3)
    assert [c.name for c in project.spark.table(f"{project.schema}.add_column").schema][:4] == [
        "id",
        "col1",
        "col2",
        "col3",
    ]


def test_schema_changes_at_one_instant_compose_and_repeat_as_no_ops(project: DbtProject) -> None:
    """Two adds and a drop at one T: one new version per active row, whatever the order; the drop
    touches only rows where the column is not NULL and keeps the column; repeating the changes in
    a later batch opens and closes nothing."""
    case = fresh(project, "compose_changes")
    first = [row(1, "a", 1, T(1), TMAX, True, T(5)), row(2, "b", None, T(1), TMAX, True, T(5))]
    changes = [
        SchemaChange("drop_column", "col2", T(5)),
        SchemaChange("add_column", "col4", T(5), type="bigint", default=4),
        SchemaChange("add_column", "col3", T(5), type="string", default="x"),
    ]
    case.land(batch(1, replace=first, earliest=[]))
    case.land(batch(2, schema_changes=changes))
    case.run()
    wide = COLS + [Column("col4", "bigint"), Column("col3", "string")]
    expected = [
        row(1, "a", 1, T(1), T(5) - ONE_MS, False, T(5), col3=None, col4=None),
        row(1, "a", None, T(5), TMAX, True, T(5), col3="x", col4=4),
        row(2, "b", None, T(1), T(5) - ONE_MS, False, T(5), col3=None, col4=None),
        row(2, "b", None, T(5), TMAX, True, T(5), col3="x", col4=4),
    ]
    assert case.fivetran_rows() == case.expected(expected, wide)
    physical = case.physical_rows()
    case.land(batch(3, schema_changes=changes[::-1]))
    case.run()
    assert case.physical_rows() == physical, "repeating schema changes is a no-op"
    last = case.transactions()[-1]
    assert (last["batch_id"], last["versions_opened"], last["versions_closed"]) == ("000003", 0, 0)


def test_a_lost_transaction_record_is_restored_from_the_commit(project: DbtProject) -> None:
    """A group of batches is one commit of the history table, which carries its transactions; the
    transactions table is derived from it. A record lost after the commit (a run stopped between
    the two) is restored from the commit by the next run, with its counts; the batch is not
    applied again."""
    case = fresh(project, "stopped")
    case.land(batch(1, replace=INITIAL, earliest=[]))
    case.land(batch(2, delete=[{"id": 1, "_fivetran_end": T(3)}]))
    case.run()
    table, recorded = case.physical_rows(), case.transactions()
    lost = recorded[-1]
    project.spark.sql(f"delete from `{project.schema}`.lakehistory_transactions where txn_id = {lost['txn_id']}")
    case.run()
    assert case.physical_rows() == table
    assert case.transactions() == recorded
