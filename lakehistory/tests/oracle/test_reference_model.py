"""Pure-Python tests of the reference model (fivetran.py), the stream strategies (streams.py) and the
batch writer (lakehistory.landing.write). No Spark, no dbt."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import gzip
import io
import json
import pathlib
import random

import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehistory.landing.batch import ONE_MS, TMAX, UNMODIFIED, Batch, Column, SchemaChange, Truncate
from lakehistory.landing.write import format_timestamp, write_batch
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED

from .fivetran import BatchError, apply_batch, apply_stream, earliest_set, state_at
from .streams import DELETED_COLUMNS, batch_streams, streams_with_history

BASE = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def T(n: float) -> dt.datetime:
    """Instant `Tn` of the seed's examples: n hours after BASE."""
    return BASE + dt.timedelta(hours=n)


ID = [Column("id", "bigint")]
COLS = ID + [Column("col1", "string"), Column("col2", "bigint")]
DEL = "_fivetran_deleted"
COLS_DEL = COLS + [Column(DEL, "boolean")]


def row(id_, col1, col2, start, end, active, synced, **extra):
    return {"id": id_, "col1": col1, "col2": col2, START: start, END: end, ACTIVE: active, SYNCED: synced, **extra}


def batch(columns=COLS, key=("id",), **kw) -> Batch:
    return Batch(
        table="t",
        batch_id=kw.pop("batch_id", "000001"),
        sequence=kw.pop("sequence", 1),
        key=list(key),
        columns=list(columns),
        **kw,
    )


def ordered(rows):
    return sorted(rows, key=lambda r: (tuple(str(r[c]) for c in ("id", "region") if c in r), r[START]))


def same(actual, expected):
    assert ordered(actual) == ordered(expected)


# --- the seed's worked examples, as the spec corrects them --------------------------------------

SEED_UPDATES_TABLE = [
    row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
    row(1, "pqr", 2, T(2), TMAX, True, T(101)),
    row(2, "mno", 3, T(2), TMAX, True, T(103)),
]


@pytest.mark.parametrize("form", ["flag", "earliest_rows"])
def test_seed_replace_example_1(form):
    table = SEED_UPDATES_TABLE
    rows = [
        row(1, "def", 1, T(3), T(4) - ONE_MS, False, T(104), **{EARLIEST: True}),
        row(1, "ghi", 1, T(4), TMAX, True, T(105), **{EARLIEST: False}),
    ]
    if form == "earliest_rows":
        rows = [{k: v for k, v in r.items() if k != EARLIEST} for r in rows]
        b = batch(replace=rows, earliest=[{"id": 1, START: T(3)}])
    else:
        b = batch(replace=rows)
    same(
        apply_batch(table, b),
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(3) - ONE_MS, False, T(101)),
            row(2, "mno", 3, T(2), TMAX, True, T(103)),  # the seed wrongly shows T3: id 2 is not in the batch
            row(1, "def", 1, T(3), T(4) - ONE_MS, False, T(104)),
            row(1, "ghi", 1, T(4), TMAX, True, T(105)),
        ],
    )


def test_seed_replace_example_2():
    table = [
        row(1, "xyz", 4, T(1), T(3) - ONE_MS, False, T(100)),
        row(1, "abc", 1, T(3), T(4) - ONE_MS, False, T(100)),
        row(1, "pqr", 2, T(4), TMAX, True, T(101)),
        row(2, "mno", 3, T(4), TMAX, True, T(103)),
    ]
    b = batch(replace=[row(1, "ghi", 1, T(2), TMAX, True, T(104), **{EARLIEST: True})])
    same(
        apply_batch(table, b),
        [
            row(1, "xyz", 4, T(1), T(3) - ONE_MS, False, T(100)),  # inactive: never touched (rule 8)
            row(1, "ghi", 1, T(2), TMAX, True, T(104)),
            row(2, "mno", 3, T(4), TMAX, True, T(103)),
        ],
    )


def test_seed_updates_example():
    b = batch(
        update=[
            row(1, "xyz", UNMODIFIED, T(3), T(5) - ONE_MS, False, T(107), **{EARLIEST: True}),
            row(2, UNMODIFIED, 1000, T(4), TMAX, True, T(108), **{EARLIEST: True}),
            row(1, "def", UNMODIFIED, T(5), TMAX, True, T(109), **{EARLIEST: False}),
        ]
    )
    same(
        apply_batch(SEED_UPDATES_TABLE, b),
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100)),
            row(1, "pqr", 2, T(2), T(3) - ONE_MS, False, T(101)),
            row(2, "mno", 3, T(2), T(4) - ONE_MS, False, T(103)),
            row(1, "def", 2, T(5), TMAX, True, T(109)),
            row(1, "xyz", 2, T(3), T(5) - ONE_MS, False, T(107)),
            row(2, "mno", 1000, T(4), TMAX, True, T(108)),
        ],
    )


@pytest.mark.parametrize("deleted_column", [False, True])
def test_seed_deletes_example(deleted_column):
    table = [dict(r, **({DEL: False} if deleted_column else {})) for r in SEED_UPDATES_TABLE]
    # The seed's delete file also carries _fivetran_earliest = TRUE and no start: ignored (rule 6, 11).
    b = batch(
        columns=COLS_DEL if deleted_column else COLS,
        deleted_column=DEL,
        delete=[{"id": 1, START: None, END: T(3), ACTIVE: None, EARLIEST: True, SYNCED: T(104)}],
    )
    extra = {DEL: False} if deleted_column else {}
    closed = {DEL: True} if deleted_column else {}
    same(
        apply_batch(table, b),
        [
            row(1, "abc", 1, T(1), T(2) - ONE_MS, False, T(100), **extra),
            row(1, "pqr", 2, T(2), T(3), False, T(101), **closed),  # the delete time itself, no -1 ms
            row(2, "mno", 3, T(2), TMAX, True, T(103), **extra),
        ],
    )


# --- one test per rule --------------------------------------------------------------------------


def test_rule_6_earliest_set():
    r1 = row(1, "a", 1, T(5), TMAX, True, T(9))
    r2 = row(2, "b", 2, T(6), T(7) - ONE_MS, False, T(9))
    r3 = row(2, "c", 3, T(7), TMAX, True, T(9))
    # published form: minimum per key; delete-only keys are not in E even if an earliest row names them
    b = batch(
        replace=[r1, r2, r3],
        delete=[{"id": 3, END: T(8)}],
        earliest=[{"id": 1, START: T(5)}, {"id": 2, START: T(7)}, {"id": 2, START: T(6)}, {"id": 3, START: T(1)}],
    )
    assert earliest_set(b) == {(1,): T(5), (2,): T(6)}
    # seed form: rows flagged TRUE
    flagged = [dict(r1, **{EARLIEST: True}), dict(r2, **{EARLIEST: True}), dict(r3, **{EARLIEST: False})]
    assert earliest_set(batch(replace=flagged)) == {(1,): T(5), (2,): T(6)}
    # earliest rows win over flags; an unflagged key is not in E
    assert earliest_set(batch(replace=flagged, earliest=[{"id": 2, START: T(7)}])) == {(2,): T(7)}
    assert earliest_set(batch(replace=[dict(r1, **{EARLIEST: True}), dict(r3, **{EARLIEST: False})])) == {(1,): T(5)}
    # neither form (a first batch): every key at its minimum start
    assert earliest_set(batch(replace=[r1, r2, r3])) == {(1,): T(5), (2,): T(6)}
    # a key only deleted keeps its older versions: the delete closes the active row (rule 11)
    table = [row(3, "x", 0, T(2), TMAX, True, T(2))]
    b = batch(delete=[{"id": 3, END: T(8)}], earliest=[{"id": 3, START: T(1)}])
    same(apply_batch(table, b), [row(3, "x", 0, T(2), T(8), False, T(2))])


def test_rule_7_overlap_delete_inclusive_on_source_key_only():
    kc = [Column("id", "bigint"), Column("region", "string"), Column("col1", "string"), Column("col2", "bigint")]

    def r(id_, region, col1, start, end, active):
        return {
            "id": id_,
            "region": region,
            "col1": col1,
            "col2": 0,
            START: start,
            END: end,
            ACTIVE: active,
            SYNCED: T(0),
        }

    table = [
        r(1, "a", "v1", T(1), T(3) - ONE_MS, False),
        r(1, "a", "v3", T(3), T(4) - ONE_MS, False),  # start == E: deleted (inclusive)
        r(1, "a", "v4", T(4), TMAX, True),
        r(1, "b", "other", T(3), TMAX, True),  # same id, other region: untouched
        r(2, "a", "other", T(4), TMAX, True),  # same region, other id: untouched
    ]
    new = r(1, "a", "new", T(3), TMAX, True)
    out = apply_batch(
        table, batch(columns=kc, key=("id", "region"), replace=[new], earliest=[{"id": 1, "region": "a", START: T(3)}])
    )
    same(out, [table[0], new, table[3], table[4]])


def test_rule_8_close_active_row():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(10), **{DEL: False}),
        row(1, "b", 2, T(2), TMAX, True, T(11), **{DEL: False}),
    ]
    new = row(1, "c", 3, T(5), TMAX, True, T(12), **{DEL: False})
    out = apply_batch(table, batch(columns=COLS_DEL, replace=[new], deleted_column=DEL))
    same(
        out,
        [
            table[0],  # inactive: untouched
            row(1, "b", 2, T(2), T(5) - ONE_MS, False, T(11), **{DEL: True}),  # synced unchanged
            new,
        ],
    )
    # a deleted column the table lacks is not created
    plain = [{k: v for k, v in r.items() if k != DEL} for r in table]
    out = apply_batch(plain, batch(replace=[{k: v for k, v in new.items() if k != DEL}], deleted_column=DEL))
    assert all(DEL not in r for r in out)
    assert out[1][END] == T(5) - ONE_MS and out[1][ACTIVE] is False
    # no deleted column named: nothing but active/end changes
    out = apply_batch(table, batch(columns=COLS_DEL, replace=[new]))
    assert out[1][DEL] is False and out[1][END] == T(5) - ONE_MS


def test_rule_9_replace_rows_inserted_as_sent():
    sent = row(1, "x", None, T(3), T(3) + ONE_MS, False, T(20), **{EARLIEST: True})
    out = apply_batch([], batch(replace=[sent]))
    assert out == [row(1, "x", None, T(3), T(3) + ONE_MS, False, T(20))]
    assert EARLIEST not in out[0]


def test_rule_10_unmodified_cells_take_the_previous_version():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(9), **{DEL: False}),
        row(1, "b", 2, T(2), T(3), False, T(9), **{DEL: True}),  # latest destination version: inactive (deleted)
    ]
    u1 = row(1, UNMODIFIED, None, T(4), T(5) - ONE_MS, False, T(10), **{DEL: UNMODIFIED})  # explicit NULL stays
    u2 = row(1, "c", UNMODIFIED, T(5), T(6) - ONE_MS, False, T(10), **{DEL: UNMODIFIED})  # chain of updates
    r3 = row(1, "d", 7, T(6), T(7) - ONE_MS, False, T(10), **{DEL: False})
    u4 = row(1, UNMODIFIED, UNMODIFIED, T(7), TMAX, True, T(10), **{DEL: UNMODIFIED})  # after a replace
    lone = row(2, UNMODIFIED, 5, T(4), T(5) - ONE_MS, False, T(10), **{DEL: False})  # no previous: ignored
    after = row(2, "z", UNMODIFIED, T(5), TMAX, True, T(10), **{DEL: False})  # ignored too
    b = batch(columns=COLS_DEL, deleted_column=DEL, replace=[r3], update=[u4, after, u2, lone, u1])
    same(
        apply_batch(table, b),
        [
            *table,
            row(1, "b", None, T(4), T(5) - ONE_MS, False, T(10), **{DEL: False}),
            row(1, "c", None, T(5), T(6) - ONE_MS, False, T(10), **{DEL: False}),
            r3,
            row(1, "d", 7, T(7), TMAX, True, T(10), **{DEL: False}),
        ],
    )


def test_rule_10_previous_version_is_the_latest_older_destination_row():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(9)),
        row(1, "b", 2, T(2), T(4) - ONE_MS, False, T(9)),
        row(1, "c", 3, T(4), TMAX, True, T(9)),
    ]
    # E = T3 (from the earliest rows) removes T4; the update at T3 inherits from T2, not T1 or T4.
    u = row(1, UNMODIFIED, 30, T(3), TMAX, True, T(10))
    same(
        apply_batch(table, batch(update=[u], earliest=[{"id": 1, START: T(3)}])),
        [
            table[0],
            table[1],
            row(1, "b", 30, T(3), TMAX, True, T(10)),
        ],
    )


def test_rule_11_deletes():
    table = [
        row(1, "a", 1, T(1), TMAX, True, T(9), **{DEL: False}),
        row(2, "b", 2, T(1), T(2), False, T(9), **{DEL: True}),
    ]
    new = row(3, "n", 3, T(4), TMAX, True, T(10), **{DEL: False})
    b = batch(
        columns=COLS_DEL,
        deleted_column=DEL,
        replace=[new],
        delete=[
            {"id": 1, END: T(6)},
            {"id": 1, END: T(5)},  # several: the earliest end wins
            {"id": 2, END: T(7)},  # no active row: nothing
            {"id": 3, END: T(8)},  # closes the row this batch inserted (deletes come after inserts)
        ],
    )
    same(
        apply_batch(table, b),
        [
            row(1, "a", 1, T(1), T(5), False, T(9), **{DEL: True}),
            table[1],
            row(3, "n", 3, T(4), T(8), False, T(10), **{DEL: True}),
        ],
    )


def test_rule_12_file_order_does_not_matter():
    table = [row(1, "a", 1, T(1), TMAX, True, T(9))]
    versions = [
        row(1, "b", 2, T(2), T(3) - ONE_MS, False, T(10)),
        row(1, UNMODIFIED, 3, T(3), T(4) - ONE_MS, False, T(10)),
        row(1, "d", UNMODIFIED, T(4), TMAX, True, T(10)),
    ]
    expected = apply_batch(table, batch(replace=[versions[0]], update=versions[1:]))
    assert [r["col1"] for r in expected] == ["a", "b", "b", "d"]
    assert apply_batch(table, batch(replace=[versions[0]], update=versions[:0:-1])) == expected
    assert apply_batch(table, batch(replace=[versions[0]], update=versions[2:] + versions[1:2])) == expected


def test_rule_13_applying_a_batch_twice_is_applying_it_once():
    table = [
        row(1, "a", 1, T(1), TMAX, True, T(9), **{DEL: False}),
        row(2, "b", 2, T(1), TMAX, True, T(9), **{DEL: False}),
    ]
    b = batch(
        columns=COLS_DEL,
        deleted_column=DEL,
        replace=[row(1, "c", 1, T(2), T(3) - ONE_MS, False, T(10), **{DEL: False})],
        update=[row(1, UNMODIFIED, 5, T(3), TMAX, True, T(10), **{DEL: UNMODIFIED})],
        delete=[{"id": 2, END: T(4)}, {"id": 1, END: T(5)}],
    )
    once = apply_batch(table, b)
    assert apply_batch(once, b) == once


def test_rule_14_two_versions_with_one_start_fail_loudly():
    table = [row(1, "a", 1, T(1), TMAX, True, T(9))]
    snapshot = [dict(r) for r in table]
    b = batch(
        replace=[row(7, "x", 1, T(2), TMAX, True, T(10))], update=[row(7, "y", UNMODIFIED, T(2), TMAX, True, T(10))]
    )
    with pytest.raises(BatchError, match=r"\{'id': 7\}") as info:
        apply_batch(table, b)
    assert "replace" in str(info.value) and "update" in str(info.value)
    assert table == snapshot
    with pytest.raises(BatchError):
        apply_batch([], batch(replace=[row(7, "x", 1, T(2), TMAX, True, T(10))] * 2))
    with pytest.raises(BatchError):  # UNMODIFIED is for update files only (rule 5)
        apply_batch([], batch(replace=[row(7, UNMODIFIED, 1, T(2), TMAX, True, T(10))]))


def test_rule_15_hard_truncate():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5)),
        row(1, "b", 2, T(2), TMAX, True, T(6)),
        row(2, "c", 3, T(1), TMAX, True, T(7)),
    ]
    new = row(3, "n", 1, T(8), TMAX, True, T(8))
    out = apply_batch(table, batch(truncate=Truncate("hard", T(7)), replace=[new]))
    same(out, [table[2], new])


def test_rule_16_soft_truncate():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5)),
        row(1, "b", 2, T(2), TMAX, True, T(6)),
        row(2, "c", 3, T(1), TMAX, True, T(7)),
    ]
    out = apply_batch(table, batch(truncate=Truncate("soft", T(7))))
    same(out, [table[0], row(1, "b", 2, T(2), T(7), False, T(6)), table[2]])


def test_rule_17_add_column():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5)),
        row(1, "b", 2, T(2), TMAX, True, T(6)),
        row(2, "c", 3, T(9), TMAX, True, T(9)),  # starts after T: untouched
    ]
    add = SchemaChange("add_column", "col3", T(5), type="string", default="dflt")
    out = apply_batch(table, batch(schema_changes=[add]))
    same(
        out,
        [
            dict(table[0], col3=None),
            row(1, "b", 2, T(2), T(5) - ONE_MS, False, T(6), col3=None),
            row(1, "b", 2, T(5), TMAX, True, T(6), col3="dflt"),
            dict(table[2], col3=None),
        ],
    )
    assert apply_batch(out, batch(schema_changes=[add])) == out  # repeating is a no-op


def test_rule_17_drop_column_only_where_not_null_and_never_physically():
    table = [
        row(1, "a", 1, T(1), TMAX, True, T(5)),
        row(2, "b", None, T(1), TMAX, True, T(5)),
        row(3, "c", 3, T(1), T(2), False, T(5)),
    ]
    drop = SchemaChange("drop_column", "col2", T(5))
    out = apply_batch(table, batch(schema_changes=[drop]))
    same(
        out,
        [
            row(1, "a", 1, T(1), T(5) - ONE_MS, False, T(5)),
            row(1, "a", None, T(5), TMAX, True, T(5)),
            table[1],
            table[2],
        ],
    )
    assert all("col2" in r for r in out)
    assert apply_batch(out, batch(schema_changes=[drop])) == out


def test_rule_17_changes_at_one_instant_compose():
    table = [row(1, "a", 1, T(1), TMAX, True, T(5))]
    add3 = SchemaChange("add_column", "col3", T(5), type="string", default="x")
    add4 = SchemaChange("add_column", "col4", T(5), type="bigint", default=4)
    drop2 = SchemaChange("drop_column", "col2", T(5))
    expected = [
        row(1, "a", 1, T(1), T(5) - ONE_MS, False, T(5), col3=None, col4=None),
        row(1, "a", None, T(5), TMAX, True, T(5), col3="x", col4=4),
    ]
    for order in ([add3, add4, drop2], [drop2, add4, add3], [add4, drop2, add3]):
        same(apply_batch(table, batch(schema_changes=order)), expected)
        # the same changes in two batches, or repeated, give the same table
        step = apply_batch(table, batch(schema_changes=order[:1]))
        same(apply_batch(step, batch(schema_changes=order[1:] + order)), expected)


def test_rule_17_schema_changes_come_before_the_rows():
    table = [row(1, "a", 1, T(1), TMAX, True, T(5))]
    add = SchemaChange("add_column", "col3", T(5), type="string", default="x")
    u = row(1, "b", UNMODIFIED, T(6), TMAX, True, T(7), col3=UNMODIFIED)
    out = apply_batch(table, batch(columns=COLS + [Column("col3", "string")], schema_changes=[add], update=[u]))
    assert out[-1] == row(1, "b", 1, T(6), TMAX, True, T(7), col3="x")
    assert [(r[START], r[END], r[ACTIVE]) for r in out] == [
        (T(1), T(5) - ONE_MS, False),
        (T(5), T(6) - ONE_MS, False),
        (T(6), TMAX, True),
    ]


def test_rule_18_state_at():
    table = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(5)),
        row(1, "b", 2, T(2), T(3), False, T(5)),
        row(2, "c", 3, T(1), TMAX, True, T(5)),
    ]
    assert state_at(table, T(2) - ONE_MS) == [table[0], table[2]]
    assert state_at(table, T(2)) == [table[1], table[2]]
    assert state_at(table, T(3)) == [table[1], table[2]]  # end is inclusive
    assert state_at(table, T(3) + ONE_MS) == [table[2]]
    assert state_at(table, T(0)) == []


def test_apply_stream_skips_repeated_ids_and_refuses_old_sequences():
    b1 = batch(replace=[row(1, "a", 1, T(1), TMAX, True, T(1))])
    b2 = batch(batch_id="000002", sequence=2, update=[row(1, "b", UNMODIFIED, T(2), TMAX, True, T(2))])
    out = apply_stream([b1, b2, b2])
    assert [(r["col1"], r["col2"], r[ACTIVE]) for r in out] == [("a", 1, False), ("b", 1, True)]
    with pytest.raises(BatchError, match="sequence"):
        apply_stream([b2, dataclasses.replace(b1, batch_id="000003")])


# --- properties of generated streams -------------------------------------------------------------


def _check_table(rows, key):
    versions = [(tuple(r[c] for c in key), r[START]) for r in rows]
    assert len(versions) == len(set(versions)), "rule 1: (key, _fivetran_start) is unique"
    active = [tuple(r[c] for c in key) for r in rows if r[ACTIVE]]
    assert len(active) == len(set(active)), "rule 1: at most one active row per key"
    for r in rows:
        assert not r[ACTIVE] or r[END] == TMAX, "an active row ends at TMAX"
        assert UNMODIFIED not in r.values()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_streams(max_batches=5))
def test_streams_are_valid_and_batches_idempotent(stream):
    columns, key, batches = stream
    assert [b.sequence for b in batches] == list(range(1, len(batches) + 1))
    table: list = []
    for b in batches:
        for r in [*b.replace, *b.update]:
            assert r[START].microsecond % 1000 == 0 and r[START].tzinfo is not None
        nxt = apply_batch(table, b)
        assert apply_batch(nxt, b) == nxt, "rule 13"
        _check_table(nxt, key)
        table = nxt
    assert apply_stream(batches) == table
    names = {c.name for c in columns}
    assert all(set(r) == names | {START, END, ACTIVE, SYNCED} for r in table)


def _versions(rows, drop=()):
    return sorted(repr(sorted((k, repr(v)) for k, v in r.items() if k not in drop)) for r in rows)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams_with_history(max_batches=5))
def test_streams_rebuild_the_source_history(stream):
    """An independent check of the model: applying a stream gives the simulated source's history
    (ignoring `_fivetran_synced` and the deleted column, which rules 8 and 11 set on closing).
    Late versions differ only in the end of the row before them, which rule 8 does not touch."""
    _, key, batches, history, late = stream
    table = apply_stream(batches)
    drop = (SYNCED, *DELETED_COLUMNS) + ((END,) if late else ())
    assert _versions(table, drop) == _versions(history, drop)
    if late:
        ends = {(tuple(r[c] for c in key), r[START]): r[END] for r in history}
        for r in table:
            if r[END] != ends[(tuple(r[c] for c in key), r[START])]:
                assert not r[ACTIVE] and r[END] > ends[(tuple(r[c] for c in key), r[START])]


# --- the writer -----------------------------------------------------------------------------------

WEIRD = ["", "a,b", 'say "hi"', "line\nbreak", "back\\slash", "\\N-ish", "naïve – 中文 😀", " padded ", "\r\n"]
W_COLS = [
    Column("id", "bigint"),
    Column("region", "string"),
    Column("txt", "string"),
    Column("num", "double"),
    Column("flag", "boolean"),
    Column("ts", "timestamp"),
    Column("day", "date"),
]


def _writer_batch(**kw) -> Batch:
    def r(i, txt, start, end, active, **extra):
        return {
            "id": i,
            "region": "r,1",
            "txt": txt,
            "num": 1.5,
            "flag": i % 2 == 0,
            "ts": dt.datetime(2007, 12, 3, 10, 15, 30, 123000, tzinfo=dt.UTC),
            "day": dt.date(2020, 2, 29),
            START: start,
            END: end,
            ACTIVE: active,
            SYNCED: T(9),
            **extra,
        }

    replace = [r(i, t, T(1), TMAX, True) for i, t in enumerate(WEIRD)]
    replace.append(r(100, None, T(1), T(2) - ONE_MS, False))
    update = [r(100, UNMODIFIED, T(2), TMAX, True, num=None, flag=UNMODIFIED)]
    return Batch(
        table="weird_table",
        batch_id="000007",
        sequence=7,
        key=["id", "region"],
        columns=W_COLS,
        replace=replace,
        update=update,
        delete=[{"id": 0, "region": "r,1", END: T(3), "txt": "ignored"}],
        null_string="<NULL>",
        unmodified_string="<UNMOD>",
        deleted_column="gone",
        truncate=Truncate("soft", T(0)),
        commit_message="weird",
        schema_changes=[
            SchemaChange("add_column", "extra", T(0), type="bigint", default=5),
            SchemaChange("drop_column", "old", T(0)),
        ],
        **kw,
    )


def _read(folder: pathlib.Path, path: str) -> tuple[list[str], list[dict[str, str]]]:
    data = (folder / path).read_bytes()
    if path.endswith(".parquet"):
        t = pq.read_table(folder / path)
        assert all(str(f.type) == "string" for f in t.schema)
        return t.column_names, t.to_pylist()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), quotechar='"', doublequote=True)
    header, *rows = list(reader)
    return header, [dict(zip(header, r, strict=True)) for r in rows]


def _expected_cells(b: Batch, r: dict, columns: list[str]) -> dict[str, str]:
    def text(v):
        if v is None:
            return b.null_string
        if v is UNMODIFIED:
            return b.unmodified_string
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dt.datetime):
            return format_timestamp(v)
        return v.isoformat() if isinstance(v, dt.date) else str(v)

    return {c: text(r[c]) for c in columns}


@pytest.mark.parametrize(
    "file_format,compression",
    [("csv", "none"), ("csv", "gzip"), ("csv", "zstd"), ("parquet", "none"), ("parquet", "zstd")],
)
@pytest.mark.parametrize("earliest_form", ["file", "column"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_writer_round_trip(tmp_path, file_format, compression, earliest_form, shuffle):
    b = _writer_batch()
    folder = write_batch(
        tmp_path,
        b,
        file_format=file_format,
        compression=compression,
        earliest_form=earliest_form,
        rng=random.Random(3) if shuffle else None,
    )
    assert folder == tmp_path / "weird_table" / "000007"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    ext = {"csv": {"none": ".csv", "gzip": ".csv.gz", "zstd": ".csv.zst"}}.get(file_format, {}).get(
        compression, ".parquet"
    )
    kinds = ["replace", "update", "delete"] + (["earliest"] if earliest_form == "file" else [])
    assert manifest["files"] == [{"kind": k, "path": f"{k}_0{ext}"} for k in kinds]
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{k}_0{ext}" for k in kinds] + ["manifest.json"])
    assert all(
        (folder / "manifest.json").stat().st_mtime_ns >= (folder / f["path"]).stat().st_mtime_ns
        for f in manifest["files"]
    )
    assert manifest == {
        "format_version": 1,
        "table": "weird_table",
        "batch_id": "000007",
        "sequence": 7,
        "key": ["id", "region"],
        "null_string": "<NULL>",
        "unmodified_string": "<UNMOD>",
        "author": "lakehistory",
        "app_id": "lakehistory",
        "commit_message": "weird",
        "deleted_column": "gone",
        "truncate": {"mode": "soft", "before": "2024-03-01T00:00:00.000Z"},
        "schema_changes": [
            {"op": "add_column", "column": "extra", "type": "bigint", "default": "5", "at": "2024-03-01T00:00:00.000Z"},
            {"op": "drop_column", "column": "old", "at": "2024-03-01T00:00:00.000Z"},
        ],
        "files": manifest["files"],
    }

    data_cols = [c.name for c in W_COLS] + [START, END, ACTIVE, SYNCED]
    if earliest_form == "column":
        data_cols.append(EARLIEST)
    canonical = {
        "replace": data_cols,
        "update": data_cols,
        "delete": ["id", "region", END],
        "earliest": ["id", "region", START],
    }
    shuffled = False
    for f in manifest["files"]:
        header, rows = _read(folder, f["path"])
        assert sorted(header) == sorted(canonical[f["kind"]])
        shuffled |= header != canonical[f["kind"]]
        if f["kind"] in ("replace", "update"):
            expected = [_expected_cells(b, r, [c for c in data_cols if c != EARLIEST]) for r in getattr(b, f["kind"])]
            assert [{k: v for k, v in r.items() if k != EARLIEST} for r in rows] == expected
            if earliest_form == "column":
                flags = [r[EARLIEST] for r in rows]
                assert flags == (["true"] * len(WEIRD) + ["true"] if f["kind"] == "replace" else ["false"])
        elif f["kind"] == "delete":
            assert rows == [{"id": "0", "region": "r,1", END: "2024-03-01T03:00:00.000Z"}]
        else:
            assert sorted(rows, key=lambda r: int(r["id"])) == [
                {"id": str(i), "region": "r,1", START: "2024-03-01T01:00:00.000Z"} for i in [*range(len(WEIRD)), 100]
            ]
    assert shuffled == shuffle
    # the tricky strings come back intact
    _, rows = _read(folder, manifest["files"][0]["path"])
    assert [r["txt"] for r in rows] == WEIRD + ["<NULL>"]
    assert rows[0]["ts"] == "2007-12-03T10:15:30.123Z" and rows[0]["day"] == "2020-02-29"


def test_writer_keeps_published_earliest_rows_and_derives_flags(tmp_path):
    rows = [
        row(1, "a", 1, T(1), T(2) - ONE_MS, False, T(9)),
        row(1, "b", 2, T(2), TMAX, True, T(9)),
        row(2, "c", 3, T(3), TMAX, True, T(9)),
    ]
    b = batch(replace=rows, earliest=[{"id": 1, START: T(1)}])  # id 2 is not in E
    folder = write_batch(tmp_path, b)
    assert _read(folder, "earliest_0.csv")[1] == [{"id": "1", START: format_timestamp(T(1))}]
    assert "_fivetran_earliest" not in _read(folder, "replace_0.csv")[0]
    folder = write_batch(tmp_path, dataclasses.replace(b, batch_id="2"), earliest_form="column")
    assert [r[EARLIEST] for r in _read(folder, "replace_0.csv")[1]] == ["true", "false", "false"]
    # neither form: each key's minimum start
    folder = write_batch(tmp_path, dataclasses.replace(b, batch_id="3", earliest=None), earliest_form="column")
    assert [r[EARLIEST] for r in _read(folder, "replace_0.csv")[1]] == ["true", "false", "true"]
    flagged = [dict(r, **{EARLIEST: f}) for r, f in zip(rows, [False, True, True], strict=True)]
    folder = write_batch(tmp_path, dataclasses.replace(b, batch_id="4", earliest=None, replace=flagged))
    assert _read(folder, "earliest_0.csv")[1] == [
        {"id": "1", START: format_timestamp(T(2))},
        {"id": "2", START: format_timestamp(T(3))},
    ]


def test_writer_refuses_what_it_cannot_write_faithfully(tmp_path):
    good = row(1, "a", 1, T(1), TMAX, True, T(9))
    for bad in [
        batch(replace=[dict(good, col1=UNMODIFIED)]),  # UNMODIFIED outside update rows
        batch(update=[dict(good, id=UNMODIFIED)]),  # ... or in a key column
        batch(replace=[dict(good, col1="\\N")]),  # a value equal to the null token
        batch(replace=[dict(good, **{START: T(1) + dt.timedelta(microseconds=1)})]),  # sub-millisecond
        batch(replace=[dict(good, **{START: T(1).replace(tzinfo=None)})]),  # naive
        batch(replace=[{k: v for k, v in good.items() if k != "col2"}]),  # missing column
        batch(replace=[dict(good, other=1)]),  # unknown column
        batch(replace=[good], null_string="x", unmodified_string="x"),
        dataclasses.replace(batch(replace=[good]), batch_id="../x"),
    ]:
        with pytest.raises(ValueError):
            write_batch(tmp_path, bad)
    assert not (tmp_path / "t" / "000001").exists()
    write_batch(tmp_path, batch(replace=[good]))
    with pytest.raises(FileExistsError):
        write_batch(tmp_path, batch(replace=[good]))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    stream=batch_streams(max_batches=3),
    fmt=st.sampled_from([("csv", "none"), ("csv", "gzip"), ("csv", "zstd"), ("parquet", "none")]),
    earliest_form=st.sampled_from(["file", "column"]),
    seed=st.integers(0, 2**32),
)
def test_writer_round_trips_generated_streams(tmp_path_factory, stream, fmt, earliest_form, seed):
    columns, key, batches = stream
    root = tmp_path_factory.mktemp("landing")
    for b in batches:
        folder = write_batch(
            root, b, file_format=fmt[0], compression=fmt[1], earliest_form=earliest_form, rng=random.Random(seed)
        )
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        names = [c.name for c in columns] + [START, END, ACTIVE, SYNCED]
        for f in manifest["files"]:
            header, rows = _read(folder, f["path"])
            if f["kind"] in ("replace", "update"):
                assert sorted(header) == sorted(names + ([EARLIEST] if earliest_form == "column" else []))
                sent = getattr(b, f["kind"])
                assert [{c: r[c] for c in names} for r in rows] == [_expected_cells(b, r, names) for r in sent]
                if earliest_form == "column":
                    e = earliest_set(b)
                    assert [r[EARLIEST] == "true" for r in rows] == [
                        e.get(tuple(s[c] for c in key)) == s[START] for s in sent
                    ]
            elif f["kind"] == "earliest":
                assert {(tuple(r[c] for c in key), r[START]) for r in rows} >= {
                    (
                        tuple(_expected_cells(b, dict(zip(key, k, strict=True)), key)[c] for c in key),
                        format_timestamp(s),
                    )
                    for k, s in earliest_set(b).items()
                }
