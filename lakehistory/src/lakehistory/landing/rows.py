"""The rows of the pending batches' files: read as strings, tokens resolved, typed by column name.

Every row keeps its batch, file and data-row number, so a bad cell is reported where it is."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED
from lakehistory.sql import q

from .files import (
    MALFORMED,
    LandedFile,
    UnreadableFileError,
    csv_options,
    headers,
    literal_path,
    read_csv_files,
    read_parquet_file,
)
from .manifests import recorded_schema_changes
from .spec import BATCH_META, INTEGER_TYPES, STAGING_TYPES, TableSpec, batch_error, first_line


def _file_format(entry: dict[str, Any]) -> str:
    if entry.get("format"):
        return str(entry["format"])
    return "parquet" if entry["path"].endswith(".parquet") else "csv"


def read_csv(spark: SparkSession, path: str) -> DataFrame:
    """One landed CSV file as Spark reads it (see files.csv_options)."""
    return csv_options(spark.read).csv(path)


def _expected_columns(spec: TableSpec, kind: str) -> tuple[set[str], set[str]]:
    """(required, allowed) column names for a file of this kind."""
    key, every = set(spec.key), {c.name for c in spec.columns}
    system = {START, END, ACTIVE, SYNCED}
    if kind in ("replace", "update"):
        # `_fivetran_earliest` is optional: without it (and without earliest files) E is empty.
        return (every - spec.migrated) | system, every | system | {EARLIEST}
    if kind == "delete":
        return key | {END}, every | system | {EARLIEST}
    return key | {START}, key | {START}


# The open end of an active row's interval, as a file writes it.
OPEN_END_TEXT = "9999-12-31T23:59:59.999Z"
# What Spark reads bytes that are not UTF-8 as: a file's text is refused rather than stored so.
REPLACEMENT_CHARACTER = "\ufffd"
MISALIGNED = "its fields do not line up with the header (a field too many or too few, or a quote never closed)"


def typed(raw: SparkColumn, sql_type: str) -> SparkColumn:
    if sql_type in INTEGER_TYPES:  # a plain cast would truncate 1.5 to 1 with ANSI off
        return F.when(raw.rlike(r"^\s*[+-]?[0-9]+\s*$"), raw.cast(sql_type))
    return raw.cast(sql_type)


@dataclass(frozen=True)
class _Entry:
    """A file of a pending batch, with what staging puts on each of its rows."""

    file: LandedFile
    kind: str
    ordinal: int
    manifest: dict[str, Any]


def _entries(pending: list[dict[str, Any]]) -> list[_Entry]:
    entries: list[_Entry] = []
    for ordinal, m in enumerate(pending, start=1):
        for e in m["files"]:
            path = f"{m['_folder']}/{m['batch_id']}/{literal_path(e['path'])}"
            file = LandedFile(len(entries), m["batch_id"], e["path"], path, _file_format(e))
            entries.append(_Entry(file, e["kind"], ordinal, m))
    return entries


def _read_files(spark: SparkSession, spec: TableSpec, entries: list[_Entry]) -> DataFrame:
    """The raw rows (every cell a string) of the files, each with its file's key (`_lh_file_key`)
    and data row (`_lh_row`); the columns of every file checked against its kind."""
    csv_files = [e.file for e in entries if e.file.file_format != "parquet"]
    try:
        found = headers(spark, csv_files)
        frames = {e.file.key: read_parquet_file(spark, e.file) for e in entries if e.file.file_format == "parquet"}
    except UnreadableFileError as exc:
        raise batch_error(exc.file.batch_id, f"file {exc.file.entry} cannot be read: {first_line(exc.cause)}") from exc
    for e in entries:
        f = e.file
        columns = found[f.key].names if f.key in found else frames[f.key].columns[:-2]
        required, allowed = _expected_columns(spec, e.kind)
        if twice := sorted({c for c in columns if columns.count(c) > 1}):
            raise batch_error(f.batch_id, f"{e.kind} file {f.entry} names column(s) {', '.join(twice)} more than once")
        if missing := sorted(required - set(columns)):
            raise batch_error(f.batch_id, f"{e.kind} file {f.entry} lacks column(s) {', '.join(missing)}")
        if unknown := sorted(set(columns) - allowed):
            raise batch_error(f.batch_id, f"{e.kind} file {f.entry} has unknown column(s) {', '.join(unknown)}")
    parts = ([read_csv_files(spark, csv_files, found)] if csv_files else []) + list(frames.values())
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


def _file_table(spark: SparkSession, spec: TableSpec, entries: list[_Entry]) -> DataFrame:
    """One row per file: its kind and its batch's manifest (tokens and metadata)."""
    rows = [
        (
            e.file.key,
            e.kind,
            e.file.entry,
            e.manifest["null_string"],
            e.manifest["unmodified_string"],
            spec.table,
            e.manifest["batch_id"],
            e.manifest["sequence"],
            e.ordinal,
            any(f["kind"] == "earliest" for f in e.manifest["files"]),
            e.manifest.get("deleted_column"),
            e.manifest.get("author"),
            e.manifest.get("app_id"),
            e.manifest.get("commit_message"),
        )
        for e in entries
    ]
    return spark.createDataFrame(
        rows,
        "_lh_file_key int, _lh_kind string, _lh_file string, _lh_null_token string, _lh_unmodified_token string,"
        " _lh_source_table string, _lh_batch_id string, _lh_sequence bigint, _lh_ordinal bigint,"
        " _lh_has_earliest_file boolean, _lh_deleted_column string, _lh_author string, _lh_app_id string,"
        " _lh_commit_message string",
    )


def stage_rows(spark: SparkSession, spec: TableSpec, pending: list[dict[str, Any]]) -> DataFrame | None:
    """The rows of every file of the pending batches, typed, with the merge's metadata columns
    (not yet validated)."""
    entries = _entries(pending)
    if not entries:
        return None
    raw = _read_files(spark, spec, entries)
    wanted = [c.name for c in spec.columns] + [START, END, ACTIVE, SYNCED, EARLIEST]
    raw = raw.select(
        *[F.col(q(c)) if c in raw.columns else F.lit(None).cast("string").alias(c) for c in wanted],
        F.col(MALFORMED) if MALFORMED in raw.columns else F.lit(False).alias(MALFORMED),
        "_lh_file_key",
        "_lh_row",
    ).join(F.broadcast(_file_table(spark, spec, entries)), "_lh_file_key")
    null_token, unmodified_token = F.col("_lh_null_token"), F.col("_lh_unmodified_token")

    def value(name: str, sql_type: str) -> SparkColumn:
        cell = F.col(q(name))
        return F.when((cell == null_token) | (cell == unmodified_token), None).otherwise(typed(cell, sql_type))

    types = {c.name: c.type for c in spec.columns} | {
        START: "timestamp",
        END: "timestamp",
        ACTIVE: "boolean",
        SYNCED: "timestamp",
        EARLIEST: "boolean",
    }
    unmodified = F.filter(
        F.array(*[F.when(F.col(q(c.name)) == unmodified_token, F.lit(c.name)) for c in spec.data_columns]),
        lambda name: name.isNotNull(),
    )
    # What is wrong with a row, the first thing found: its fields do not line up with the header;
    # a cell is not UTF-8; a cell is text (not a token) that does not convert; its interval is not
    # a Fivetran row's.
    malformed = F.coalesce(F.col(MALFORMED), F.lit(False))  # NULL in a Parquet file's rows
    not_utf8 = [
        F.when(
            F.col(q(name)).contains(REPLACEMENT_CHARACTER),
            F.lit(f"column {name}: the text is not valid UTF-8 (a file's text must be UTF-8)"),
        )
        for name in types
    ]
    does_not_convert = [
        F.when(
            F.col(q(name)).isNotNull()
            & (F.col(q(name)) != null_token)
            & (F.col(q(name)) != unmodified_token)
            & value(name, sql_type).isNull(),
            F.concat(F.lit(f"column {name}: {sql_type} expected, found "), F.to_json(F.array(F.col(q(name))))),
        )
        for name, sql_type in types.items()
    ]
    bad_cell = F.coalesce(
        F.when(malformed, F.lit(MISALIGNED)),
        *not_utf8,
        *does_not_convert,
        _bad_interval(value(START, "timestamp"), value(END, "timestamp"), value(ACTIVE, "boolean")),
    )
    return raw.select(
        *[value(name, sql_type).alias(name) for name, sql_type in types.items()],
        unmodified.alias("_lh_unmodified"),
        "_lh_source_table",
        "_lh_kind",
        "_lh_batch_id",
        "_lh_sequence",
        "_lh_ordinal",
        "_lh_has_earliest_file",
        "_lh_deleted_column",
        "_lh_author",
        "_lh_app_id",
        "_lh_commit_message",
        F.lit(None).cast("string").alias("_lh_commit_json"),
        F.lit(None).cast("string").alias("_lh_schema_changes"),
        F.lit(None).cast(STAGING_TYPES["_lh_sync"]).alias("_lh_sync"),
        F.lit(None).cast("string").alias("_lh_truncate_mode"),
        F.lit(None).cast("timestamp").alias("_lh_truncate_before"),
        F.lit(None).cast("string").alias("_lh_change_op"),
        F.lit(None).cast("string").alias("_lh_change_column"),
        "_lh_file",
        "_lh_row",
        bad_cell.alias("_lh_bad_cell"),
        _token_misuse(spec, unmodified_token, null_token).alias("_lh_misuse"),
    )


def _bad_interval(start: SparkColumn, end: SparkColumn, active: SparkColumn) -> SparkColumn:
    """A version (replace or update row) whose interval no Fivetran row has: it starts after it
    ends, or it is active without the open end (or inactive with it)."""
    version = F.col("_lh_kind").isin("replace", "update")
    open_end = F.lit(OPEN_END_TEXT).cast("timestamp")
    shown = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    return F.coalesce(
        F.when(
            version & (start > end),
            F.concat(
                F.lit(f"{START} "),
                F.date_format(start, shown),
                F.lit(f" is after {END} "),
                F.date_format(end, shown),
            ),
        ),
        F.when(
            version & active & (end != open_end),
            F.lit(f"an active row ({ACTIVE} true) must have {END} {OPEN_END_TEXT}, the open end"),
        ),
        F.when(
            version & ~active & (end == open_end),
            F.lit(f"an inactive row ({ACTIVE} false) cannot have {END} {OPEN_END_TEXT}, the open end"),
        ),
    )


def _token_misuse(spec: TableSpec, unmodified_token: SparkColumn, null_token: SparkColumn) -> SparkColumn:
    """What a row does with the tokens that it may not: unmodified outside update data columns,
    NULL or unmodified in key columns, missing system values."""
    kind = F.col("_lh_kind")
    checks = []
    for name in spec.key:
        cell = F.col(q(name))
        checks.append(F.when(cell.isNull() | (cell == null_token), F.lit(f"key column {name} is NULL")))
        checks.append(F.when(cell == unmodified_token, F.lit(f"key column {name} holds unmodified_string")))
    for c in spec.data_columns:
        checks.append(
            F.when(
                (kind != "update") & (F.col(q(c.name)) == unmodified_token),
                F.concat(F.lit(f"column {c.name} holds unmodified_string in a "), kind, F.lit(" file")),
            )
        )
    for c in [c for c in spec.data_columns if c.name in spec.not_null]:
        cell = F.col(q(c.name))
        # A file from before a schema change added the column lacks it (rule 17): no value to check.
        absent = cell.isNull() if c.name not in spec.migrated else F.lit(False)
        checks.append(
            F.when(
                kind.isin("replace", "update") & (absent | (cell == null_token)),
                F.lit(f"column {c.name} is NULL, and the source declares it not_null"),
            )
        )
    needs = {
        START: ("replace", "update", "earliest"),
        END: ("replace", "update", "delete"),
        ACTIVE: ("replace", "update"),
    }
    needs |= {SYNCED: ("replace", "update")}
    for name, kinds in needs.items():
        cell = F.col(q(name))
        checks.append(
            F.when(
                kind.isin(*kinds) & (cell.isNull() | (cell == null_token) | (cell == unmodified_token)),
                F.lit(f"system column {name} has no value"),
            )
        )
    return F.coalesce(*checks)


def batch_markers(spark: SparkSession, spec: TableSpec, pending: list[dict[str, Any]]) -> DataFrame:
    """One `_lh_kind = 'batch'` row per pending batch, so that a batch without rows is applied
    (and recorded) too. Its data and system columns are NULL."""
    rows = [
        {
            "_lh_unmodified": [],
            "_lh_source_table": spec.table,
            "_lh_kind": "batch",
            "_lh_batch_id": m["batch_id"],
            "_lh_sequence": m["sequence"],
            "_lh_ordinal": ordinal,
            "_lh_has_earliest_file": False,
            "_lh_deleted_column": m.get("deleted_column"),
            "_lh_author": m.get("author"),
            "_lh_app_id": m.get("app_id"),
            "_lh_commit_message": m.get("commit_message"),
            "_lh_commit_json": m.get("commit_json"),
            "_lh_schema_changes": recorded_schema_changes(m),
            "_lh_sync": m.get("sync"),
            "_lh_truncate_mode": (m.get("truncate") or {}).get("mode"),
            "_lh_file": "manifest.json",
            "_lh_row": 0,
        }
        for ordinal, m in enumerate(pending, start=1)
    ]
    schema = spec.staged_schema()
    markers = spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)
    # The truncate cutoff is text in the manifest; Spark parses it like every other timestamp.
    cutoffs = spark.createDataFrame(
        [(ordinal, (m.get("truncate") or {}).get("before")) for ordinal, m in enumerate(pending, start=1)],
        "_lh_ordinal bigint, _lh_truncate_text string",
    )
    markers = markers.drop("_lh_truncate_before").join(cutoffs, "_lh_ordinal")
    cutoff = F.col("_lh_truncate_text").cast("timestamp")
    return markers.select(
        *[cutoff.alias(name) if name == "_lh_truncate_before" else F.col(q(name)) for name in schema.fieldNames()],
        F.lit(None).cast("string").alias("_lh_bad_cell"),
        F.when(
            F.col("_lh_truncate_text").isNotNull() & cutoff.isNull(),
            F.concat(F.lit("truncate before: a timestamp expected, found "), F.to_json(F.array("_lh_truncate_text"))),
        ).alias("_lh_misuse"),
    )


def schema_change_rows(spark: SparkSession, spec: TableSpec, pending: list[dict[str, Any]]) -> DataFrame | None:
    """One `_lh_kind = 'schema_change'` row per schema change of a pending batch (rule 17), in
    manifest order (`_lh_row`): `_fivetran_start` holds the change's instant T and the changed
    column holds the value it takes (the default of an add, NULL for a drop), typed like every
    other cell. Other data columns are NULL. A drop of a column the table never had is a no-op."""
    names = {c.name for c in spec.columns}
    entries = [
        (ordinal, index, change["op"], change["column"], change.get("default"), change["at"])
        for ordinal, m in enumerate(pending, start=1)
        for index, change in enumerate(m.get("schema_changes") or [], start=1)
        if change["column"] in names
    ]
    if not entries:
        return None
    raw = spark.createDataFrame(
        entries,
        "_lh_ordinal bigint, _lh_row bigint, _lh_change_op string, _lh_change_column string, "
        "_lh_default string, _lh_at string",
    )
    meta = batch_markers(spark, spec, pending).select("_lh_ordinal", *BATCH_META)
    at = F.col("_lh_at").cast("timestamp")
    types = {c.name: c.type for c in spec.columns}
    target = {
        name: F.when(F.col("_lh_change_column") == name, typed(F.col("_lh_default"), t)) for name, t in types.items()
    }
    label = F.concat(
        F.lit("schema_changes["),
        F.col("_lh_row").cast("string"),
        F.lit("] ("),
        F.col("_lh_change_op"),
        F.lit(" "),
        F.col("_lh_change_column"),
        F.lit("): "),
    )
    bad_default = F.coalesce(
        *[
            F.when(
                (F.col("_lh_change_column") == name) & F.col("_lh_default").isNotNull() & target[name].isNull(),
                F.concat(label, F.lit(f"default: {t} expected, found "), F.to_json(F.array("_lh_default"))),
            )
            for name, t in types.items()
        ]
    )
    rows = raw.join(meta, "_lh_ordinal").select(
        *[target[name].alias(name) for name in types],
        at.alias(START),
        *[
            F.lit(None).cast(t).alias(n)
            for n, t in ((END, "timestamp"), (ACTIVE, "boolean"), (SYNCED, "timestamp"), (EARLIEST, "boolean"))
        ],
        F.array().cast("array<string>").alias("_lh_unmodified"),
        F.lit("schema_change").alias("_lh_kind"),
        F.lit("manifest.json").alias("_lh_file"),
        "*",
    )
    return rows.select(
        *[F.col(q(name)) for name in spec.staged_schema().fieldNames()],
        F.lit(None).cast("string").alias("_lh_bad_cell"),
        F.coalesce(
            F.when(
                at.isNull(), F.concat(label, F.lit("at: a timestamp expected, found "), F.to_json(F.array("_lh_at")))
            ),
            bad_default,
        ).alias("_lh_misuse"),
    )
