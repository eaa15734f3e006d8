"""What a history table expects of its batches (`TableSpec`), and the error a bad batch raises."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import ArrayType, DataType, LongType, StructField, StructType

from lakehistory.errors import LakehistoryError
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED, ReservedNameError, refuse_reserved

from .batch import Column

# The landing format's version (manifest.json `format_version`): what the writer writes, the only one staging reads.
FORMAT_VERSION = 1
KINDS = ("replace", "update", "delete", "earliest")
SCHEMA_OPS = ("add_column", "drop_column")


# Staging adds `_lh_*` columns to every row (see TableSpec.staged_schema); the history merge reads
# them and the history table never stores them. These repeat the batch's manifest on each row.
BATCH_META = (
    "_lh_source_table",
    "_lh_batch_id",
    "_lh_sequence",
    "_lh_has_earliest_file",
    "_lh_deleted_column",
    "_lh_author",
    "_lh_app_id",
    "_lh_commit_message",
    "_lh_commit_json",
    "_lh_schema_changes",
    "_lh_sync",
    "_lh_truncate_mode",
    "_lh_truncate_before",
)


# A staged row: the source's columns, the protocol's, then staging's own, all `_lh_*`.
PROTOCOL_TYPES = {START: "timestamp", END: "timestamp", ACTIVE: "boolean", SYNCED: "timestamp", EARLIEST: "boolean"}
STAGING_TYPES = {
    "_lh_unmodified": "array<string>",
    "_lh_source_table": "string",
    "_lh_kind": "string",
    "_lh_batch_id": "string",
    "_lh_sequence": "bigint",
    "_lh_ordinal": "bigint",
    "_lh_has_earliest_file": "boolean",
    "_lh_deleted_column": "string",
    "_lh_author": "string",
    "_lh_app_id": "string",
    "_lh_commit_message": "string",
    "_lh_commit_json": "string",  # on a batch's marker and schema rows, like `_lh_sync`
    "_lh_schema_changes": "string",  # the same: the manifest's schema changes, as its transaction records them
    "_lh_sync": "struct<id:string,sequence:bigint,tables:array<string>>",  # on a batch's marker and schema rows
    "_lh_truncate_mode": "string",
    "_lh_truncate_before": "timestamp",
    "_lh_change_op": "string",
    "_lh_change_column": "string",
    "_lh_file": "string",
    "_lh_row": "bigint",
}
STAGING_COLUMNS = tuple(STAGING_TYPES)


SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$")
INTEGER_TYPES = {"tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte"}


class BatchError(LakehistoryError, ValueError):
    """Bad input in a landed batch. Nothing of the run has been applied."""


@dataclass(frozen=True)
class TableSpec:
    """What a history table expects of its batches."""

    table: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]  # key and data columns with Spark SQL types; no system columns
    # Columns a schema change adds or drops (rule 17): files from before the add or after the drop
    # may lack them, and their cells are then NULL.
    migrated: frozenset[str] = frozenset()
    # Feature states are built from the table: each names the application that made it (seed 002).
    app_id_required: bool = False
    # Columns the source declares NOT NULL (a `not_null` constraint on the source column): no
    # version may hold NULL in them, and the history table declares them NOT NULL.
    not_null: frozenset[str] = frozenset()

    @property
    def data_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.name not in self.key)

    def __post_init__(self) -> None:
        try:
            refuse_reserved(
                self.table,
                [c.name for c in self.columns],
                "landing",
                hint="Declare the source's columns only: staging adds the protocol's columns with their types,"
                " and its own columns start with _lh_.",
            )
        except ReservedNameError as exc:
            raise BatchError(str(exc)) from None
        if unknown := sorted(self.not_null - {c.name for c in self.columns}):
            raise BatchError(f"{self.table}: not_null names undeclared column(s) {', '.join(unknown)}")

    def staged_schema(self) -> StructType:
        """The typed staging schema, also what an empty run returns."""
        fields = [StructField(c.name, spark_type(c.type)) for c in self.columns]
        fields += [StructField(name, spark_type(t)) for name, t in PROTOCOL_TYPES.items()]
        fields += [StructField(name, spark_type(t)) for name, t in STAGING_TYPES.items()]
        return StructType(fields)


def spark_type(sql_type: str) -> DataType:
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(sql_type)


def is_plain_name(name: object) -> bool:
    """A name of one file or folder inside its parent (a table's folder, a batch folder, a batch's
    file), which a manifest may use and the writer writes. No folder separators
    or `..` (a file elsewhere), no `:` (Hadoop reads `scheme:` as a URL: `file:/etc/passwd`),
    no control characters."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not any(c in name for c in "/\\:")
        and name.isprintable()
    )


def conform(folder: str, where: str, value: Any, kind: DataType, scalar_as_text: bool = False) -> Any:
    """`value` (parsed JSON) checked against `kind`: an object's absent fields become None;
    `scalar_as_text` takes a number or boolean for a string, as its JSON text."""
    if value is None:
        return None

    def wrong(expected: str) -> BatchError:
        return batch_error(folder, f"{where} is {json.dumps(value)[:60]}; expected {expected}")

    if isinstance(kind, StructType):
        if not isinstance(value, dict):
            raise wrong("an object")
        # A schema change's default is text, a number or a boolean, as the column's type wants.
        return {
            f.name: conform(folder, f"{where} field {f.name!r}", value.get(f.name), f.dataType, f.name == "default")
            for f in kind
        }
    if isinstance(kind, ArrayType):
        if not isinstance(value, list):
            raise wrong("a list")
        return [conform(folder, f"{where}[{i}]", v, kind.elementType) for i, v in enumerate(value)]
    if isinstance(kind, LongType):
        if type(value) is not int or not -(2**63) <= value < 2**63:
            raise wrong("an integer of at most 64 bits")
        return value
    if scalar_as_text and isinstance(value, int | float | bool):
        return json.dumps(value)
    if not isinstance(value, str):
        raise wrong("a string")
    return value


def batch_error(batch: str, message: str) -> BatchError:
    return BatchError(f"Batch {batch}: {message}")


def first_line(exc: Exception) -> str:
    """What went wrong, in one line: for an error from the JVM its root cause (Py4J's own first
    line, "An error occurred while calling o123.csv.", says nothing)."""
    text = _root_cause(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _root_cause(exc: Exception) -> str:
    cause = getattr(exc, "java_exception", None)  # a Py4JJavaError's Java exception
    if cause is None:
        return str(exc)
    try:
        for _ in range(20):  # the chain of causes, to the innermost
            inner = cause.getCause()
            if inner is None or inner.equals(cause):
                break
            cause = inner
        return f"{cause.getClass().getSimpleName()}: {cause.getMessage()}"
    except Exception:  # the JVM is gone: what Python has
        return str(exc)


def spec_columns(columns: Sequence[Sequence[str]]) -> tuple[Column, ...]:
    return tuple(Column(name, sql_type) for name, sql_type in columns)
