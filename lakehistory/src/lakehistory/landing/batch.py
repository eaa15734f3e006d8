"""A change batch for one table, as Fivetran's history mode sends it (spec/fivetran-history-mode.md).

This is the in-memory form shared by the batch writer (which lands it as files), the demo
generator and the tests' reference model. Values are Python values: `None` is NULL, the
`UNMODIFIED` marker is an update-file cell that means "unchanged" (rule 10). Timestamps are
timezone-aware UTC `datetime`s with millisecond precision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The protocol's columns, for the modules that speak of batches (declared in lakehistory.names).

ONE_MS = dt.timedelta(milliseconds=1)
TMAX = dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC)


class _Unmodified:
    """The `unmodified_string` of an update file, before it is written as a token."""

    _instance: _Unmodified | None = None

    def __new__(cls) -> _Unmodified:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNMODIFIED"


UNMODIFIED = _Unmodified()

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """A source column and its Spark SQL type (`bigint`, `string`, `double`, `boolean`,
    `timestamp`, `date`, `decimal(p,s)`, ...)."""

    name: str
    type: str


@dataclass(frozen=True)
class SchemaChange:
    """History-mode schema change (rule 17), applied before the batch's rows."""

    op: Literal["add_column", "drop_column"]
    column: str
    at: dt.datetime
    type: str | None = None  # add_column only
    default: Any = None  # add_column only


@dataclass(frozen=True)
class Truncate:
    """Truncate before a cutoff (rules 15 and 16), applied before the batch's rows."""

    mode: Literal["hard", "soft"]
    before: dt.datetime


# An extract's sync file: `<YYYY-MM-DD>.sync.json` beside `<YYYY-MM-DD>.csv`, written before it.
EXTRACT_SYNC_SUFFIX = ".sync.json"


@dataclass(frozen=True)
class Sync:
    """The sync a batch belongs to: what a source delivered together, for several tables. Its
    batches (one per table that changed) become one transaction, visible once every table of
    `tables` has applied it. Syncs are applied in `sequence` order."""

    id: str
    sequence: int
    tables: tuple[str, ...]


@dataclass
class Batch:
    """One batch for one table. Rows are dicts keyed by column name.

    replace/update rows: key columns, data columns and the four system columns; in the seed
        form they also carry `_fivetran_earliest` (bool).
    delete rows: key columns and `_fivetran_end` (other columns are ignored).
    earliest rows: key columns and `_fivetran_start` (the published form). When `earliest`
        is None the earliest set comes from rows with `_fivetran_earliest = True`.
    """

    table: str
    batch_id: str
    sequence: int
    key: Sequence[str]
    columns: Sequence[Column]  # key and data columns, in table order (no system columns)
    replace: list[Row] = field(default_factory=list)
    update: list[Row] = field(default_factory=list)
    delete: list[Row] = field(default_factory=list)
    earliest: list[Row] | None = None
    deleted_column: str | None = None
    truncate: Truncate | None = None
    schema_changes: list[SchemaChange] = field(default_factory=list)
    author: str | None = "lakehistory"
    app_id: str | None = "lakehistory"
    commit_message: str | None = None
    commit_json: Any = None  # any JSON value
    sync: Sync | None = None
    null_string: str = "\\N"
    unmodified_string: str = "__unmodified__"
