"""Hypothesis strategies for random but valid change-batch streams of one small history table.

A stream simulates a source over valid time and emits batches the way Fivetran history mode
does (spec/fivetran-history-mode.md): inserts, partial updates (UNMODIFIED cells, explicit NULLs),
several versions of one key per batch, deletes (delete rows, or the deleted version sent as a
closed row), resurrections, late versions (a batch whose earliest start for a key lies before
versions already sent, re-sending the key's versions from there on), re-delivered batches (same
content, new batch id and sequence), and both earliest forms (earliest rows, `_fivetran_earliest`
flags, both, or, in a first batch, neither), and updates of keys the source never had (rule 10:
ignored, in any batch, the first one included). Timestamps are whole milliseconds, UTC, and distinct
per key. Streams stay small: they are replayed through Spark.

    from hypothesis import given
    from .streams import batch_streams

    @given(batch_streams(max_batches=4))
    def test_something(stream):
        columns, key, batches = stream
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from lakehistory.landing.batch import ONE_MS, TMAX, UNMODIFIED, Batch, Column, Row
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED

__all__ = [
    "DELETED_COLUMNS",
    "NULL_TOKENS",
    "TABLE",
    "UNMODIFIED_TOKENS",
    "VALUE_STRATEGIES",
    "batch_streams",
    "deleted_column_of",
    "key_columns_of",
    "streams_with_history",
    "string_values",
]

TABLE = "oracle_stream"
# A table's deleted column: a plain name, or Fivetran's own (data like any other column).
DELETED_COLUMNS = ("deleted", "_fivetran_deleted")
MISSING_DELETED_COLUMN = "is_deleted"  # named by batches of tables that lack it
# A single key: a plain name, or the key Fivetran gives a table without a primary key.
SINGLE_KEYS = ("id", "_fivetran_id")
NULL_TOKENS = ("\\N", "NULL", "<null>", "∅")
UNMODIFIED_TOKENS = ("__unmodified__", "<unmod>", "~u~")
_TOKENS = frozenset(NULL_TOKENS + UNMODIFIED_TOKENS)
_ALPHABET = ["a", "Z", "N", "U", "L", "0", " ", ",", '"', "'", "\n", "\\", "\t", ";", "|", "é", "ß", "中", "😀"]
_BASE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

Key = tuple[Any, ...]

string_values = st.text(alphabet=st.sampled_from(_ALPHABET), max_size=6).filter(lambda s: s not in _TOKENS)


def _ms(d: dt.datetime) -> dt.datetime:
    return d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=dt.UTC)


VALUE_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "bigint": st.integers(-(2**63), 2**63 - 1),
    "string": string_values,
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "timestamp": st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(_ms),
}
_DATA_COLUMNS = (
    Column("s_text", "string"),
    Column("n_big", "bigint"),
    Column("d_dbl", "double"),
    Column("b_flag", "boolean"),
    Column("t_ts", "timestamp"),
    Column("_fivetran_note", "string"),  # a connector's own column: data, whatever its prefix
)
_ID_VALUES = (1, 2, -7, 2**62)
_REGION_VALUES = ("a", "b,c", 'q"t', "ü", "")


@dataclass
class _Version:
    start: int  # ms after _BASE
    values: dict[str, Any]  # data columns (the deleted column, when present, is False)
    full: bool  # an insert (first version or resurrection): always sent as a replace row
    deleted_at: int | None = None  # the key was deleted at this instant, after this version


def _ts(ms: int) -> dt.datetime:
    return _BASE + ms * ONE_MS


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b and repr(a) == repr(b)


class _Stream:
    """The source: per key, its versions over valid time; emits one batch per sync window."""

    def __init__(
        self,
        draw: Callable[[st.SearchStrategy[Any]], Any],
        columns: list[Column],
        key: list[str],
        keys: list[Key],
        strays: list[Key],
        deleted_mode: str,
        deleted_name: str,
        max_events: int,
    ) -> None:
        self.draw = draw
        self.columns = columns
        self.key = key
        self.keys = keys
        self.strays = strays  # keys of the key's domain that are never inserted
        self.deleted = deleted_name if deleted_mode == "table" else None
        self.named = {"table": deleted_name, "named_missing": MISSING_DELETED_COLUMN}.get(deleted_mode)
        self.data = [c for c in columns if c.name not in key and c.name != self.deleted]
        self.max_events = max_events
        self.timeline: dict[Key, list[_Version]] = {}
        self.now = draw(st.integers(0, 10**6))
        self.late_sent = False  # a batch re-sent a key from a late version

    def _tick(self) -> int:
        self.now += self.draw(st.one_of(st.integers(1, 5000), st.integers(1, 3600).map(lambda s: s * 1000)))
        return self.now

    def _random_values(self) -> dict[str, Any]:
        values = {c.name: self.draw(st.none() | VALUE_STRATEGIES[c.type]) for c in self.data}
        if self.deleted:
            values[self.deleted] = False
        return values

    def _changed_values(self, previous: dict[str, Any]) -> dict[str, Any]:
        values = dict(previous)
        names = [c.name for c in self.data]
        for name in self.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)):
            kind = next(c.type for c in self.data if c.name == name)
            values[name] = self.draw(st.none() | VALUE_STRATEGIES[kind])
        return values

    def _late(self, changed: dict[Key, int]) -> None:
        """A version that arrives late: strictly inside the valid time of an already sent version
        that was followed by another event (a next version or its deletion)."""
        candidates = []
        for k, versions in self.timeline.items():
            for i, v in enumerate(versions):
                limit = (
                    v.deleted_at
                    if v.deleted_at is not None
                    else (versions[i + 1].start if i + 1 < len(versions) else None)
                )
                if limit is not None and limit - v.start >= 2:
                    candidates.append((k, i))
        if not candidates or self.draw(st.integers(0, 2)) != 0:
            return
        k, i = self.draw(st.sampled_from(candidates))
        versions = self.timeline[k]
        v = versions[i]
        limit = v.deleted_at if v.deleted_at is not None else versions[i + 1].start
        t = self.draw(st.integers(v.start + 1, limit - 1))
        versions.insert(i + 1, _Version(t, self._changed_values(v.values), False, v.deleted_at))
        v.deleted_at = None
        changed[k] = min(changed.get(k, t), t)
        self.late_sent = True

    def _event(self, changed: dict[Key, int]) -> None:
        alive = [k for k, vs in self.timeline.items() if vs[-1].deleted_at is None]
        gone = [k for k, vs in self.timeline.items() if vs[-1].deleted_at is not None]
        unused = [k for k in self.keys if k not in self.timeline]
        options = (["insert"] if unused else []) + (["update", "update", "delete"] if alive else [])
        options += ["resurrect"] if gone else []
        op = self.draw(st.sampled_from(options))
        t = self._tick()
        if op == "insert":
            k = unused[0]
            self.timeline[k] = [_Version(t, self._random_values(), True)]
        elif op == "resurrect":
            k = self.draw(st.sampled_from(gone))
            self.timeline[k].append(_Version(t, self._random_values(), True))
        else:
            k = self.draw(st.sampled_from(alive))
            last = self.timeline[k][-1]
            if op == "update":
                self.timeline[k].append(_Version(t, self._changed_values(last.values), False))
            else:
                last.deleted_at = t
        changed[k] = min(changed.get(k, t), t)

    def _row(self, k: Key, versions: list[_Version], j: int, synced: int, as_update: bool, delete_row: bool) -> Row:
        v = versions[j]
        nxt = versions[j + 1] if j + 1 < len(versions) else None
        closed_by_delete = v.deleted_at is not None and not delete_row
        row: Row = dict(zip(self.key, k))
        for name, value in v.values.items():
            if as_update and name != self.deleted and _same(value, versions[j - 1].values[name]):
                value = self.draw(st.sampled_from([UNMODIFIED, value]))
            row[name] = value
        if self.deleted:
            row[self.deleted] = (
                True if closed_by_delete else (self.draw(st.sampled_from([UNMODIFIED, False])) if as_update else False)
            )
        if v.deleted_at is not None and closed_by_delete:
            end, active = _ts(v.deleted_at), False
        elif nxt is not None:
            end, active = _ts(nxt.start) - ONE_MS, False
        else:
            end, active = TMAX, True
        row.update({START: _ts(v.start), END: end, ACTIVE: active, SYNCED: _ts(synced)})
        return row

    def _stray_update(self, synced: int, form: str) -> Row:
        """An update of a key that has no version anywhere: rule 10 ignores it."""
        row: Row = dict(zip(self.key, self.draw(st.sampled_from(self.strays))))
        for name, value in self._random_values().items():
            row[name] = self.draw(st.sampled_from([UNMODIFIED, value]))
        start = self.draw(st.integers(0, self.now))
        row.update({START: _ts(start), END: TMAX, ACTIVE: True, SYNCED: _ts(synced)})
        if form in ("seed", "both"):
            row[EARLIEST] = True
        return row

    def history(self) -> list[Row]:
        """The source's true history: every version with its valid time (no deleted column, no
        `_fivetran_synced`)."""
        rows = []
        for k, versions in self.timeline.items():
            for j, v in enumerate(versions):
                if v.deleted_at is not None:
                    end, active = _ts(v.deleted_at), False
                elif j + 1 < len(versions):
                    end, active = _ts(versions[j + 1].start) - ONE_MS, False
                else:
                    end, active = TMAX, True
                values = {n: x for n, x in v.values.items() if n != self.deleted}
                rows.append({**dict(zip(self.key, k)), **values, START: _ts(v.start), END: end, ACTIVE: active})
        return rows

    def batch(self, sequence: int) -> Batch:
        changed: dict[Key, int] = {}
        self._late(changed)
        for _ in range(self.draw(st.integers(1, self.max_events))):
            self._event(changed)
        synced = self._tick()
        form = self.draw(st.sampled_from(["published", "seed", "both"] + (["neither"] if sequence == 1 else [])))
        replace: list[Row] = []
        update: list[Row] = []
        delete: list[Row] = []
        earliest: list[Row] = []
        for k, since in changed.items():
            versions = self.timeline[k]
            last = len(versions) - 1
            sent = [
                j
                for j, v in enumerate(versions)
                if v.start >= since or (v.deleted_at is not None and v.deleted_at >= since and j < last)
            ]
            deleted_at = versions[last].deleted_at
            delete_row = deleted_at is not None and deleted_at >= since and (not sent or self.draw(st.booleans()))
            if deleted_at is not None and delete_row:
                delete.append({**dict(zip(self.key, k)), END: _ts(deleted_at)})
            if not sent:
                continue
            first = versions[sent[0]].start
            earliest.append({**dict(zip(self.key, k)), START: _ts(first)})
            for j in sent:
                as_update = not versions[j].full and self.draw(st.booleans())
                row = self._row(k, versions, j, synced, as_update, delete_row and j == last)
                if form in ("seed", "both"):
                    row[EARLIEST] = versions[j].start == first
                (update if as_update else replace).append(row)
        if self.strays and self.draw(st.integers(0, 3)) == 0:
            update.append(self._stray_update(synced, form))
        shuffle = self.draw(st.randoms(use_true_random=False)).shuffle
        shuffle(replace)  # file order is not start order (rule 12)
        shuffle(update)
        return Batch(
            table=TABLE,
            batch_id=f"{sequence:06d}",
            sequence=sequence,
            key=list(self.key),
            columns=list(self.columns),
            replace=replace,
            update=update,
            delete=delete,
            earliest=earliest if form in ("published", "both") else None,
            deleted_column=self.named,
            null_string=self.draw(st.sampled_from(NULL_TOKENS)),
            unmodified_string=self.draw(st.sampled_from(UNMODIFIED_TOKENS)),
            commit_message=f"sync {sequence}",
        )


def _redelivered(batch: Batch, sequence: int) -> Batch:
    return dataclasses.replace(
        batch,
        batch_id=f"{sequence:06d}",
        sequence=sequence,
        replace=[dict(r) for r in batch.replace],
        update=[dict(r) for r in batch.update],
        delete=[dict(r) for r in batch.delete],
        earliest=None if batch.earliest is None else [dict(r) for r in batch.earliest],
    )


@st.composite
def streams_with_history(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    max_batches: int = 4,
    max_keys: int = 3,
    max_events: int = 3,
    composite_key: bool | None = None,
    deleted_mode: str | None = None,
) -> tuple[list[Column], list[str], list[Batch], list[Row], bool]:
    """Like `batch_streams`, plus the source's true history after the last batch (rows with key,
    data columns except the deleted column, `_fivetran_start`, `_fivetran_end`, `_fivetran_active`)
    and whether a batch re-sent a key from a late version. Without late versions, applying the
    batches (rules 6-13) yields exactly that history; with them, rule 8 leaves the row before the
    late version with its old `_fivetran_end`."""
    composite = draw(st.booleans()) if composite_key is None else composite_key
    mode = deleted_mode or draw(st.sampled_from(["none", "table", "named_missing"]))
    deleted_name = draw(st.sampled_from(DELETED_COLUMNS))
    first_key = "id" if composite else draw(st.sampled_from(SINGLE_KEYS))
    key_columns = [Column(first_key, "bigint")] + ([Column("region", "string")] if composite else [])
    extra = draw(st.lists(st.sampled_from(_DATA_COLUMNS[1:]), unique=True, max_size=len(_DATA_COLUMNS) - 1))
    data = [c for c in _DATA_COLUMNS if c == _DATA_COLUMNS[0] or c in extra]
    columns = key_columns + data + ([Column(deleted_name, "boolean")] if mode == "table" else [])
    key = [c.name for c in key_columns]
    key_value = (
        st.tuples(st.sampled_from(_ID_VALUES), st.sampled_from(_REGION_VALUES))
        if composite
        else st.tuples(st.sampled_from(_ID_VALUES))
    )
    keys = draw(st.lists(key_value, min_size=1, max_size=max_keys, unique=True))
    domain = [(i, r) for i in _ID_VALUES for r in _REGION_VALUES] if composite else [(i,) for i in _ID_VALUES]
    strays = [k for k in domain if k not in keys]

    stream = _Stream(draw, columns, key, keys, strays, mode, deleted_name, max_events)
    batches: list[Batch] = []
    count = draw(st.integers(1, max_batches))
    while len(batches) < count:
        sequence = len(batches) + 1
        if batches and draw(st.integers(0, 4)) == 0:
            batches.append(_redelivered(batches[-1], sequence))
        else:
            batches.append(stream.batch(sequence))
    return columns, key, batches, stream.history(), stream.late_sent


def batch_streams(
    max_batches: int = 4,
    max_keys: int = 3,
    max_events: int = 3,
    composite_key: bool | None = None,
    deleted_mode: str | None = None,
) -> st.SearchStrategy[tuple[list[Column], list[str], list[Batch]]]:
    """A strategy of `(columns, key, batches)` for one table.

    columns: key and data columns in table order (`id` or `_fivetran_id` bigint, or for composite
        keys `id` and `region` string; `s_text` string plus a random subset of
        bigint/double/boolean/timestamp columns and `_fivetran_note` string; `deleted` or
        `_fivetran_deleted` boolean when the table has a deleted column).
    key: the source primary-key column names (1 or 2 columns; up to `max_keys` key values).
    batches: 1..max_batches batches with sequences 1, 2, ..., each with 1..max_events source events
        (a re-delivered batch repeats the previous one's content with the next id and sequence).
    composite_key: force a 2-column (True) or 1-column (False) key; drawn when None.
    deleted_mode: "none" (no deleted column), "table" (the table has `deleted` or
        `_fivetran_deleted` and batches name it), "named_missing" (batches name `is_deleted`, which
        the table lacks); drawn when None.
    """
    return streams_with_history(max_batches, max_keys, max_events, composite_key, deleted_mode).map(
        lambda s: (s[0], s[1], s[2])
    )


def deleted_column_of(columns: Sequence[Column]) -> str | None:
    """The stream's deleted column, when its table has one."""
    return next((c.name for c in columns if c.name in DELETED_COLUMNS), None)


def key_columns_of(columns: Sequence[Column], key: Sequence[str]) -> list[Column]:
    """The stream's key columns, in key order."""
    return [next(c for c in columns if c.name == k) for k in key]


def keys_of(rows: Sequence[Row], key: Sequence[str]) -> list[Key]:
    """The distinct source keys of some rows, in first-seen order."""
    seen: dict[Key, None] = {}
    for r in rows:
        seen.setdefault(tuple(r[c] for c in key), None)
    return list(seen)
