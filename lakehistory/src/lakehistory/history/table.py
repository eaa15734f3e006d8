"""The history table itself: its columns (from the model's staged rows), how it writes
transaction time (the project's vars), creating it, and adding the columns a batch brings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField

from lakehistory.errors import HistoryError
from lakehistory.history.layout import Layout
from lakehistory.history.rules import SYSTEM
from lakehistory.history.transactions import create_if_missing
from lakehistory.landing.spec import STAGING_COLUMNS
from lakehistory.names import (
    ACTIVE,
    END,
    END_OF_TIME,
    FIVETRAN_PROTOCOL,
    HISTORY_SYSTEM,
    NOT_NULL_METADATA,
    START,
    SYNCED,
    ReservedNameError,
    refuse_reserved,
)
from lakehistory.sql import cols, q

# Delta stores a column whose name holds one of these only with column mapping by name.
MAPPED_NAME_CHARACTERS = frozenset(" ,;{}()\n\t=")
COLUMN_MAPPING = "'delta.columnMapping.mode' = 'name'"


@dataclass(frozen=True)
class Versioning:
    """How transaction time is written (the project vars; see macros/time_travel/versioning.sql).
    `open_end`, the `valid_to` of a current row: 'max' (the type's largest value), 'null', or a
    value of the version type (Atoti's validRowToColumnValue, e.g. 2147483647 or
    '2099-12-31 23:59:59'), which every version must stay below."""

    version_type: str = "integer"  # or 'timestamp'
    open_end: str = "max"
    append_only: bool = False

    def __post_init__(self) -> None:
        if self.version_type not in END_OF_TIME:
            raise HistoryError(
                f"var lakehistory_version_type must be 'integer' or 'timestamp', not {self.version_type!r}"
            )
        if self.open_end not in ("max", "null") and self.open_value is None:
            kind = "an integer" if self.version_type == "integer" else "a timestamp such as '2099-12-31 23:59:59'"
            raise HistoryError(f"var lakehistory_open_end must be 'max', 'null' or {kind}, not {self.open_end!r}")

    @property
    def open_value(self) -> int | dt.datetime | None:
        """The open end the project chose as a value of the version type; None for max and null."""
        if self.open_end in ("max", "null"):
            return None
        try:
            if self.version_type == "integer":
                return int(str(self.open_end).strip())
            return dt.datetime.fromisoformat(str(self.open_end).strip())
        except ValueError:
            return None

    @property
    def sql_type(self) -> str:
        return "bigint" if self.version_type == "integer" else "timestamp"

    @property
    def open(self) -> str:
        value = self.open_value
        if isinstance(value, dt.datetime):
            return f"timestamp'{value.isoformat(sep=' ')}'"
        if value is not None:
            return str(value)
        return "null" if self.open_end == "null" else END_OF_TIME[self.version_type]

    def refuse_past_open_end(self, txn_id: int, started_at: str, table: str) -> None:
        """A version at or past a chosen open end would read as a row still current."""
        value = self.open_value
        reached = (isinstance(value, int) and txn_id >= value) or (
            isinstance(value, dt.datetime) and dt.datetime.fromisoformat(started_at) >= value
        )
        if reached:
            version = txn_id if isinstance(value, int) else started_at
            raise HistoryError(
                f"nothing was applied to {table}: its next version {version} is not below the open end {value}"
                " (var lakehistory_open_end), which marks the rows still current"
            )

    def is_current(self, alias: str) -> str:
        if self.open_end == "null" or self.append_only:
            return f"{alias}.`valid_to` is null"
        return f"{alias}.`valid_to` = {self.open}"


def layout_of(
    spark: SparkSession, staged: str, keys: Sequence[str], deleted_column: str | None, table: str = ""
) -> Layout:
    """The table's columns from the model's rows: every column but the protocol's and staging's
    own is the table's, whatever its name (`_fivetran_deleted`, `_fivetran_id`, ...)."""
    fields = [f for f in spark.table(staged).schema.fields if f.name not in STAGING_COLUMNS]
    own = {name.lower() for name in FIVETRAN_PROTOCOL}
    try:
        refuse_reserved(
            table or staged,
            [f.name for f in fields if f.name.lower() not in own],
            "history",
            hint="Rename it in the model's select: `select * except ({column}), {column} as source_{column} from ...`.",
        )
    except ReservedNameError as exc:
        raise HistoryError(str(exc)) from None
    types = {f.name: f.dataType.simpleString() for f in fields}
    for system in SYSTEM:
        if system not in types:
            raise HistoryError(f"the model's rows lack {system}; select from lakehistory.landing_batches(...).")
    for key in keys:
        if key not in types:
            raise HistoryError(f"key column {key} is not a column of the model's rows.")
    data = tuple(f.name for f in fields if f.name not in keys and f.name.lower() not in own)
    if deleted_column and deleted_column not in data:
        raise HistoryError(f"deleted_column {deleted_column} is not a column of the model's rows.")
    not_null = frozenset(f.name for f in fields if f.metadata.get(NOT_NULL_METADATA))
    return Layout(tuple(keys), data, types, deleted_column, not_null)


def needs_column_mapping(names: Sequence[str]) -> bool:
    return any(MAPPED_NAME_CHARACTERS.intersection(name) for name in names)


def create_table(spark: SparkSession, target: str, layout: Layout, versions: Versioning) -> None:
    columns = [
        f"{q(c)} {layout.types[c]}{' not null' if c in layout.not_null else ''}" for c in (*layout.keys, *layout.data)
    ]
    columns += [
        f"{q(START)} timestamp not null",
        f"{q(END)} timestamp not null",
        f"{q(ACTIVE)} boolean not null",
        f"{q(SYNCED)} timestamp",
        f"`valid_from` {versions.sql_type} not null comment 'First transaction this row is part of (inclusive)'",
    ]
    if versions.append_only:
        columns.append(
            "`removal` boolean not null comment 'False: an append-only table takes no removal (lakehistory before"
            " 0.2.0 wrote a row with true when this (key, _fivetran_start) row left the table at valid_from)'"
        )
        clustering = [*layout.keys[:3], "valid_from"]
    else:
        not_null = "" if versions.open_end == "null" else " not null"
        open_text = versions.open.replace("'", "")
        columns.append(
            f"`valid_to` {versions.sql_type}{not_null} comment 'Transaction that closed this row (exclusive);"
            f" open rows hold {open_text}'"
        )
        clustering = [*layout.keys[:3], "valid_to"]
    # Delta keeps file statistics of the first 32 columns only, and clustering needs them of its
    # columns: a source table of about 30 columns or more puts the version columns past them.
    properties = ["'delta.enableDeletionVectors' = 'true'", "'delta.dataSkippingNumIndexedCols' = '-1'"]
    if needs_column_mapping([*layout.keys, *layout.data]):
        properties.append(COLUMN_MAPPING)
    # Clustered by key (the merge reads a batch's keys) and by transaction time (as-of reads skip
    # the files of versions closed before the version asked for).
    # (under the writer lock: no other writer creates it; a creation cut short is completed)
    create_if_missing(
        spark,
        target,
        f"create table {target} ({', '.join(columns)}) using delta cluster by ({cols(clustering)})"
        f" tblproperties ({', '.join(properties)})",
        wait=False,
    )


def columns_to_change(spark: SparkSession, target: str, layout: Layout) -> tuple[list[str], list[str]]:
    """The model's columns the table lacks (missing_columns) and its NOT NULL columns the source
    no longer declares NOT NULL (loosened_columns), from one read of the table's schema."""
    fields = spark.table(target).schema.fields
    return missing_columns(fields, target, layout), loosened_columns(fields, layout)


def missing_columns(fields: Sequence[StructField], target: str, layout: Layout) -> list[str]:
    """The model's columns the table `target` (its `fields`) lacks, once its stored columns are
    checked against the rows' (rule 17): the same type, none the source no longer declares."""
    stored = [f.name for f in fields]
    names = [*layout.keys, *layout.data]
    # A stored column's type is what every version of it was written with: a source declaring
    # another type would have its values cast on the way in, so the run stops instead.
    for f in fields:
        if f.name in layout.types and f.dataType.simpleString() != layout.types[f.name]:
            raise HistoryError(
                f"{target} holds column {f.name} as {f.dataType.simpleString()}, and the source now declares it as"
                f" {layout.types[f.name]}. A history table keeps the type its column was created with: declare"
                f" {f.name} as {f.dataType.simpleString()} again, or add the new values as a column of their own"
                " (an add_column schema change)."
            )
    for name in stored:
        if name not in names and name not in HISTORY_SYSTEM:
            raise HistoryError(
                f"{target} has column {name}, which the source does not declare and no landed batch adds (spec rule"
                " 17). Declare it in the source's columns with its data_type."
            )
    return [name for name in names if name not in stored]


def loosened_columns(fields: Sequence[StructField], layout: Layout) -> list[str]:
    """The table's (its `fields`) NOT NULL source columns that the source no longer declares NOT
    NULL (its `not_null` constraint taken out of the YAML)."""
    declared = {*layout.keys, *layout.data}
    return [f.name for f in fields if not f.nullable and f.name in declared - layout.not_null]


def add_new_columns(spark: SparkSession, target: str, layout: Layout) -> None:
    """Rule 17 "add the column": a column the rows bring that the table lacks joins the table
    next to the source columns (its own commit, before the group's: a rerun finds it there). A
    column the source no longer declares NOT NULL loses the constraint (so a batch may then drop
    it, and the derived tables' CHECKs follow: derived.carry_not_null)."""
    added, loosened = columns_to_change(spark, target, layout)
    for name in loosened:
        spark.sql(f"alter table {target} alter column {q(name)} drop not null")
    if not added:
        return
    stored = [f.name for f in spark.table(target).schema.fields]
    names = [*layout.keys, *layout.data]
    if needs_column_mapping(added) and not needs_column_mapping(stored):
        mode = spark.sql(f"show tblproperties {target} ('delta.columnMapping.mode')").collect()
        if not mode or mode[0].value != "name":
            spark.sql(f"alter table {target} set tblproperties ({COLUMN_MAPPING})")
    for i, name in enumerate(names):
        if name not in stored:
            spark.sql(f"alter table {target} add columns ({q(name)} {layout.types[name]} after {q(names[i - 1])})")


def current_rows(target: str, layout: Layout, versions: Versioning) -> str:
    """The history table's rows current in transaction time, as a subquery."""
    if versions.append_only:
        by = cols((*layout.keys, START))
        return (
            f"(select * except (`_lh_rank`, `removal`) from (select *, row_number() over (partition by {by}"
            f" order by `valid_from` desc) as `_lh_rank` from {target}) where `_lh_rank` = 1 and not `removal`)"
        )
    return f"(select * from {target} as c where {versions.is_current('c')})"
