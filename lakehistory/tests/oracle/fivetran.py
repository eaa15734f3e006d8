"""A pure-Python reference model of Fivetran history mode, used only as a test oracle.

It implements the numbered rules of `shared/spec/fivetran-history-mode.md` literally, on
in-memory `Batch` objects, with no I/O and no cleverness: a destination table is a list of row
dicts (key columns, data columns, the four system columns; the deleted column is an ordinary
data column when the table has one). Functions never mutate their inputs.

Choices where the spec is silent (see also each docstring):
- A batch carrying neither earliest rows nor any `_fivetran_earliest` key on its replace/update
  rows has, for every key with replace/update rows, E = that key's minimum start (the writer
  lands such a batch the same way).
- Truncate (rules 15/16) is applied before schema changes (rule 17), both before the rows.
- The table's columns are the batch's columns, plus any column already in the table or added by
  a schema change; rows lacking a column hold NULL in it.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from lakehistory.landing.batch import ONE_MS, UNMODIFIED, Batch, Row, SchemaChange, Truncate
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED
from lakehistory.names import FIVETRAN_SYSTEM as SYSTEM_COLUMNS

__all__ = ["BatchError", "apply_batch", "apply_stream", "earliest_set", "key_of", "state_at", "table_columns"]

Key = tuple[Any, ...]


class BatchError(ValueError):
    """Invalid batch input (rules 5, 14, and refused stream order); nothing is applied."""


def key_of(row: Row, key: Sequence[str]) -> Key:
    """The source primary key of a row as a tuple (composite keys compare column by column)."""
    return tuple(row[c] for c in key)


def _sort_token(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def _row_order(key: Sequence[str]):
    return lambda r: (tuple(_sort_token(r[c]) for c in key), r[START])


def table_columns(table: Sequence[Row], batch: Batch) -> list[str]:
    """Key and data columns of the table (no system columns): the batch's columns in order, then
    columns only found in the existing rows, in order of first appearance."""
    names = [c.name for c in batch.columns]
    for c in batch.key:
        if c not in names:
            names.insert(0, c)
    seen = set(names) | set(SYSTEM_COLUMNS) | {EARLIEST}
    for row in table:
        for c in row:
            if c not in seen:
                names.append(c)
                seen.add(c)
    return names


def earliest_set(batch: Batch) -> dict[Key, dt.datetime]:
    """Rule 6: per source key, the minimum `_fivetran_start` of the batch's earliest rows.

    Source of the earliest rows: `batch.earliest` (published form) when not None; otherwise the
    replace/update rows with `_fivetran_earliest` = True (seed form); otherwise, when no
    replace/update row carries `_fivetran_earliest` at all, every replace/update row (so each key
    gets its minimum start). Keys without replace/update rows (only deleted) are not in E, even if
    an earliest row names them.
    """
    rows = [*batch.replace, *batch.update]
    with_rows = {key_of(r, batch.key) for r in rows}
    if batch.earliest is not None:
        source: list[Row] = list(batch.earliest)
    elif any(EARLIEST in r for r in rows):
        source = [r for r in rows if r.get(EARLIEST) is True]
    else:
        source = rows
    e: dict[Key, dt.datetime] = {}
    for r in source:
        k = key_of(r, batch.key)
        if k in with_rows and (k not in e or r[START] < e[k]):
            e[k] = r[START]
    return e


def _validate(batch: Batch) -> None:
    """Rules 5 and 14: fail before anything is applied."""
    protected = set(batch.key) | set(SYSTEM_COLUMNS)
    seen: dict[tuple[Key, dt.datetime], str] = {}
    for kind, rows in (("replace", batch.replace), ("update", batch.update)):
        for row in rows:
            for c in (*batch.key, START):
                if row.get(c) is None or row.get(c) is UNMODIFIED:
                    raise BatchError(f"{kind} row {row!r} has no value for {c!r}")
            for c, v in row.items():
                if v is UNMODIFIED and (kind != "update" or c in protected):
                    raise BatchError(f"{kind} row {row!r}: UNMODIFIED is allowed only in update data columns")
            k = (key_of(row, batch.key), row[START])
            if k in seen:
                raise BatchError(
                    f"batch {batch.batch_id}: key {dict(zip(batch.key, k[0]))} has two versions with "
                    f"_fivetran_start {k[1].isoformat()} (in the {seen[k]} and {kind} files)"
                )
            seen[k] = kind
    for row in batch.delete:
        if any(row.get(c) is None for c in (*batch.key, END)):
            raise BatchError(f"delete row {row!r} lacks key columns or {END}")
    for row in batch.earliest or []:
        if any(row.get(c) is None for c in (*batch.key, START)):
            raise BatchError(f"earliest row {row!r} lacks key columns or {START}")


def _truncate(rows: list[Row], truncate: Truncate) -> list[Row]:
    """Rule 15 (hard): delete every row with `_fivetran_synced` < cutoff.
    Rule 16 (soft): active rows with `_fivetran_synced` < cutoff get active False, end = cutoff."""
    cutoff = truncate.before
    old = [r[SYNCED] is not None and r[SYNCED] < cutoff for r in rows]
    if truncate.mode == "hard":
        return [r for r, o in zip(rows, old) if not o]
    if truncate.mode != "soft":
        raise BatchError(f"unknown truncate mode {truncate.mode!r}")
    for r, o in zip(rows, old):
        if o and r[ACTIVE]:
            r[ACTIVE] = False
            r[END] = cutoff
    return rows


def _schema_change(rows: list[Row], columns: list[str], change: SchemaChange) -> list[Row]:
    """Rule 17, one change at instant T = `change.at` (the column is never dropped physically).

    add_column: the column joins the table (NULL in existing rows); drop_column of an unknown
    column does nothing. Target value: the default (add) or NULL (drop). For each active row
    (for drop: only those whose column is not NULL):
      - start < T: insert a copy with start = T and the column = target (all other columns,
        `_fivetran_synced` included, copied), and close the old row: active False, end = T - 1 ms;
      - start = T (a version made by an earlier change at the same T): set the column to the
        target in place when it is NULL (add) / not NULL (drop), so changes at one T compose;
      - start > T: untouched.
    Repeating a change is a no-op: after it every affected active row starts at T and holds the
    target.
    """
    t = change.at
    if change.op == "add_column":
        if change.column not in columns:
            columns.append(change.column)
            for r in rows:
                r.setdefault(change.column, None)
        target = change.default
    elif change.op == "drop_column":
        if change.column not in columns:
            return rows
        target = None
    else:
        raise BatchError(f"unknown schema change op {change.op!r}")
    c = change.column
    new: list[Row] = []
    for r in rows:
        if not r[ACTIVE]:
            continue
        if change.op == "drop_column" and r.get(c) is None:
            continue
        if r[START] < t:
            new.append({**r, c: target, START: t})
            r[ACTIVE] = False
            r[END] = t - ONE_MS
        elif r[START] == t and (r.get(c) is None) == (change.op == "add_column"):
            r[c] = target
    return rows + new


def _overlap_delete(rows: list[Row], e: dict[Key, dt.datetime], key: Sequence[str]) -> list[Row]:
    """Rule 7: for each key in E, delete rows of that source key with start >= E (inclusive);
    matching on the source PK columns only."""
    return [r for r in rows if not (key_of(r, key) in e and r[START] >= e[key_of(r, key)])]


def _close_active(rows: list[Row], e: dict[Key, dt.datetime], key: Sequence[str], deleted: str | None) -> None:
    """Rule 8: for each key in E, the row active now (after rule 7) gets active False,
    end = E - 1 ms, and the deleted column True when the batch names one the table has.
    Inactive rows and `_fivetran_synced` are never touched."""
    for r in rows:
        k = key_of(r, key)
        if k in e and r[ACTIVE]:
            r[ACTIVE] = False
            r[END] = e[k] - ONE_MS
            if deleted is not None:
                r[deleted] = True


def _new_versions(rows: list[Row], batch: Batch, columns: Sequence[str]) -> list[Row]:
    """Rules 9, 10 and 12: the rows the batch inserts.

    Each key's replace and update rows are processed together in `_fivetran_start` order, so
    the file order does not matter (rule 12). A replace row is inserted as sent (rule 9; its
    `_fivetran_earliest` is not stored). An update row's UNMODIFIED cells take the value of the
    previous version of the key (rule 10): the previous inserted row of this batch, else the
    latest surviving destination row with a smaller start, active or not. An update with no
    previous version is ignored and is no previous version for later rows. The deleted column is
    never inherited: UNMODIFIED there becomes False.
    """
    named_deleted = batch.deleted_column
    by_key: dict[Key, list[tuple[str, Row]]] = defaultdict(list)
    for kind, sent in (("replace", batch.replace), ("update", batch.update)):
        for row in sent:
            by_key[key_of(row, batch.key)].append((kind, row))
    destination: dict[Key, list[Row]] = defaultdict(list)
    for r in rows:
        destination[key_of(r, batch.key)].append(r)
    inserted: list[Row] = []
    for k, versions in by_key.items():
        previous: Row | None = None
        for kind, sent in sorted(versions, key=lambda v: v[1][START]):
            row = {c: sent.get(c) for c in (*columns, *SYSTEM_COLUMNS)}
            if kind == "update":
                if previous is None:
                    older = [r for r in destination[k] if r[START] < row[START]]
                    previous = max(older, key=lambda r: r[START]) if older else None
                if previous is None:
                    continue  # rule 10: no previous version, the update is ignored
                for c in columns:
                    if row[c] is UNMODIFIED:
                        row[c] = False if c == named_deleted else previous.get(c)
            inserted.append(row)
            previous = row
    return inserted


def _apply_deletes(rows: list[Row], batch: Batch, deleted: str | None) -> None:
    """Rule 11: after the inserts, each delete row closes its key's active row: active False,
    end = the delete row's `_fivetran_end` (no -1 ms), deleted column True when named and present.
    No active row: nothing. Several deletes of one key: taken by ascending end, so the earliest
    end wins and the others find no active row."""
    for d in sorted(batch.delete, key=lambda d: d[END]):
        k = key_of(d, batch.key)
        for r in rows:
            if r[ACTIVE] and key_of(r, batch.key) == k:
                r[ACTIVE] = False
                r[END] = d[END]
                if deleted is not None:
                    r[deleted] = True


def apply_batch(table: Sequence[Row], batch: Batch) -> list[Row]:
    """Apply one batch to a destination table and return the new table (sorted by key, start).

    Order: validation (rules 5, 14; raises `BatchError` and applies nothing), truncate (15/16),
    schema changes in list order (17), earliest set (6), overlap delete (7), close (8), inserts of
    replace and update rows (9, 10, 12), deletes (11). The input table is not modified, and
    `apply_batch(apply_batch(t, b), b) == apply_batch(t, b)` for valid batches (rule 13).
    """
    _validate(batch)
    columns = table_columns(table, batch)
    rows: list[Row] = [dict(r) for r in table]
    if batch.truncate is not None:
        rows = _truncate(rows, batch.truncate)
    for change in batch.schema_changes:
        rows = _schema_change(rows, columns, change)
    deleted = batch.deleted_column if batch.deleted_column in columns else None
    e = earliest_set(batch)
    rows = _overlap_delete(rows, e, batch.key)
    _close_active(rows, e, batch.key, deleted)
    rows = rows + _new_versions(rows, batch, columns)
    _apply_deletes(rows, batch, deleted)
    full = [{c: r.get(c) for c in (*columns, *SYSTEM_COLUMNS)} for r in rows]
    return sorted(full, key=_row_order(batch.key))


def apply_stream(batches: Iterable[Batch], table: Sequence[Row] | None = None) -> list[Row]:
    """Apply batches of one table in the given order, starting from `table` (default: empty).

    A batch whose `batch_id` was already applied is skipped (applied at most once); a batch whose
    `sequence` is not above the last applied one is refused with `BatchError`.
    """
    rows: list[Row] = list(table or [])
    applied: set = set()
    last: int | None = None
    name: str | None = None
    for batch in batches:
        if name is not None and batch.table != name:
            raise BatchError(f"batch {batch.batch_id} is for table {batch.table!r}, not {name!r}")
        name = batch.table
        if batch.batch_id in applied:
            continue
        if last is not None and batch.sequence <= last:
            raise BatchError(f"batch {batch.batch_id}: sequence {batch.sequence} is not above {last}")
        rows = apply_batch(rows, batch)
        applied.add(batch.batch_id)
        last = batch.sequence
    return rows


def state_at(table: Sequence[Row], instant: dt.datetime) -> list[Row]:
    """Rule 18: the rows valid at `instant`, i.e. `_fivetran_start <= instant <= _fivetran_end`."""
    return [dict(r) for r in table if r[START] <= instant <= r[END]]
