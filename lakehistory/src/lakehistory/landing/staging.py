"""Staging: the pending batches of one table, read as strings, tokens resolved, typed, validated.

Everything here is DataFrame work: files are read by Spark (any Spark-readable URI), casts and
checks are column expressions, and only bounded results reach the driver (the manifests, which
are one small row per batch, and at most a few offending rows when input is bad).

A batch that fails a check stops the whole run before anything is applied: the error names the
batch, the file, the data row and the column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType

from .batch import ACTIVE, EARLIEST, END, START, SYNCED, Column
from .files import LandedFile, UnreadableFileError, csv_options, headers, read_csv_files, read_parquet_file

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
    "_lh_truncate_mode",
    "_lh_truncate_before",
)
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.=-]*$")
INTEGER_TYPES = {"tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte"}


MANIFEST_SCHEMA = StructType(
    [
        StructField("format_version", LongType()),
        StructField("table", StringType()),
        StructField("batch_id", StringType()),
        StructField("sequence", LongType()),
        StructField("key", ArrayType(StringType())),
        StructField("null_string", StringType()),
        StructField("unmodified_string", StringType()),
        StructField("author", StringType()),
        StructField("app_id", StringType()),
        StructField("commit_message", StringType()),
        StructField("deleted_column", StringType()),
        StructField("truncate", StructType([StructField("mode", StringType()), StructField("before", StringType())])),
        StructField(
            "schema_changes",
            ArrayType(
                StructType(
                    [
                        StructField("op", StringType()),
                        StructField("column", StringType()),
                        StructField("type", StringType()),
                        StructField("default", StringType()),
                        StructField("at", StringType()),
                    ]
                )
            ),
        ),
        StructField(
            "files",
            ArrayType(
                StructType(
                    [
                        StructField("kind", StringType()),
                        StructField("path", StringType()),
                        StructField("format", StringType()),
                        StructField("compression", StringType()),
                    ]
                )
            ),
        ),
    ]
)


class BatchError(ValueError):
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

    @property
    def data_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.name not in self.key)

    def staged_schema(self) -> StructType:
        """The typed staging schema, also what an empty run returns."""
        fields = [StructField(c.name, _spark_type(c.type)) for c in self.columns]
        fields += [
            StructField(START, _spark_type("timestamp")),
            StructField(END, _spark_type("timestamp")),
            StructField(ACTIVE, BooleanType()),
            StructField(SYNCED, _spark_type("timestamp")),
            StructField(EARLIEST, BooleanType()),
            StructField("_lh_unmodified", ArrayType(StringType())),
            StructField("_lh_source_table", StringType()),
            StructField("_lh_kind", StringType()),
            StructField("_lh_batch_id", StringType()),
            StructField("_lh_sequence", LongType()),
            StructField("_lh_ordinal", LongType()),
            StructField("_lh_has_earliest_file", BooleanType()),
            StructField("_lh_deleted_column", StringType()),
            StructField("_lh_author", StringType()),
            StructField("_lh_app_id", StringType()),
            StructField("_lh_commit_message", StringType()),
            StructField("_lh_truncate_mode", StringType()),
            StructField("_lh_truncate_before", _spark_type("timestamp")),
            StructField("_lh_change_op", StringType()),
            StructField("_lh_change_column", StringType()),
            StructField("_lh_file", StringType()),
            StructField("_lh_row", LongType()),
        ]
        return StructType(fields)


def _spark_type(sql_type: str):
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(sql_type)


@dataclass(frozen=True)
class Applied:
    """What the transactions table says about a table: applied batch ids and the last sequence."""

    batch_ids: frozenset[str]
    last_sequence: int | None


def _fail(batch: str, message: str) -> BatchError:
    return BatchError(f"Batch {batch}: {message}")


def read_manifests(spark: SparkSession, landing_root: str, table: str) -> list[dict]:
    """Every batch folder of the table with its manifest (None where the manifest is missing)."""
    base = f"{landing_root.rstrip('/')}/{table}"
    try:
        files = spark.read.format("binaryFile").load(f"{base}/*/*").select("path")
        folders = sorted({row.path.rsplit("/", 2)[-2] for row in files.collect()})
    except Exception as exc:  # no folder for the table yet: nothing to stage
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return []
        raise
    manifests: dict[str, dict] = {}
    if folders:
        frame = spark.read.option("multiLine", True).schema(MANIFEST_SCHEMA).json(f"{base}/*/manifest.json")
        for row in frame.withColumn("_path", F.col("_metadata.file_path")).collect():
            manifests[row["_path"].rsplit("/", 2)[-2]] = {**row.asDict(recursive=True), "_folder": f"{base}"}
    return [
        manifests.get(folder, {"_missing": True, "_folder_name": folder}) | {"_folder_name": folder}
        for folder in folders
    ]


def _check_manifest(manifest: dict, spec: TableSpec) -> None:
    folder = manifest["_folder_name"]
    if manifest.get("_missing"):
        raise _fail(folder, f"folder {spec.table}/{folder} has files but no manifest.json (incomplete or not a batch)")
    if not SAFE_NAME.match(folder):
        raise _fail(folder, "a batch id may hold only letters, digits and _ . = -")
    for field in ("table", "batch_id", "sequence", "key", "null_string", "unmodified_string", "files"):
        if manifest.get(field) in (None, ""):
            raise _fail(folder, f"manifest.json lacks {field!r}")
    if manifest["batch_id"] != folder:
        raise _fail(folder, f"manifest.json names batch {manifest['batch_id']!r}, but its folder is {folder!r}")
    if manifest["table"] != spec.table:
        raise _fail(
            folder, f"manifest.json is for table {manifest['table']!r}, but this history table is {spec.table!r}"
        )
    if tuple(manifest["key"]) != spec.key:
        raise _fail(folder, f"key {manifest['key']} does not match the table's key {list(spec.key)}")
    if manifest["null_string"] == manifest["unmodified_string"]:
        raise _fail(folder, "null_string and unmodified_string must differ")
    truncate = manifest.get("truncate")
    if truncate and (truncate.get("mode") not in ("hard", "soft") or not truncate.get("before")):
        raise _fail(folder, f"truncate needs mode 'hard' or 'soft' and a 'before' timestamp, not {truncate}")
    for entry in manifest["files"]:
        if entry.get("kind") not in KINDS:
            raise _fail(folder, f"file {entry.get('path')!r} has kind {entry.get('kind')!r}; expected one of {KINDS}")


def _check_schema_change(folder: str, index: int, change: dict, spec: TableSpec) -> None:
    where = f"schema_changes[{index}]"
    if change.get("op") not in SCHEMA_OPS:
        raise _fail(folder, f"{where} has op {change.get('op')!r}; expected one of {SCHEMA_OPS}")
    if not change.get("column") or not change.get("at"):
        raise _fail(folder, f"{where} ({change['op']}) needs a 'column' and an 'at' timestamp")
    column = change["column"]
    if column in spec.key or column.startswith("_fivetran_") or column.startswith("_lh_"):
        raise _fail(folder, f"{where} ({change['op']} {column}): only a data column can be added or dropped")
    if change["op"] == "add_column":
        if not change.get("type"):
            raise _fail(folder, f"{where} (add_column {column}) needs a 'type'")
        try:
            _spark_type(change["type"])
        except Exception as exc:
            raise _fail(folder, f"{where} (add_column {column}): {change['type']!r} is not a Spark SQL type") from exc


def with_migrations(spec: TableSpec, manifests: list[dict]) -> TableSpec:
    """The table's columns once every landed schema change is counted (rule 17): a column an
    `add_column` brings joins the table with the change's type (a column the source declares
    must be declared with that type), and every added or dropped column may be absent from files."""
    declared = {c.name: c for c in spec.columns}
    added: dict[str, Column] = {}
    migrated = set(spec.migrated)
    for manifest in sorted((m for m in manifests if not m.get("_missing")), key=lambda m: m.get("sequence") or 0):
        for index, change in enumerate(manifest.get("schema_changes") or [], start=1):
            _check_schema_change(manifest["_folder_name"], index, change, spec)
            name = change["column"]
            migrated.add(name)
            if change["op"] != "add_column":
                continue
            known = declared.get(name) or added.get(name)
            if known is None:
                added[name] = Column(name, change["type"])
            elif _spark_type(known.type) != _spark_type(change["type"]):
                raise _fail(
                    manifest["_folder_name"],
                    f"schema_changes[{index}] adds {name} as {change['type']}, but the table has it as {known.type}",
                )
    return TableSpec(spec.table, spec.key, spec.columns + tuple(added.values()), frozenset(migrated))


def pending_manifests(manifests: list[dict], spec: TableSpec, applied: Applied) -> list[dict]:
    """The batches to apply, in batch order, after checking every manifest."""
    pending = []
    for manifest in manifests:
        _check_manifest(manifest, spec)
        if manifest["batch_id"] not in applied.batch_ids:
            pending.append(manifest)
    pending.sort(key=lambda m: m["sequence"])
    for earlier, later in zip(pending, pending[1:]):
        if earlier["sequence"] == later["sequence"]:
            raise _fail(later["batch_id"], f"has the same sequence {later['sequence']} as batch {earlier['batch_id']}")
    if pending and applied.last_sequence is not None and pending[0]["sequence"] <= applied.last_sequence:
        first = pending[0]
        raise _fail(
            first["batch_id"],
            f"sequence {first['sequence']} is not after the last applied sequence {applied.last_sequence}; "
            "a batch older than one already applied cannot be applied",
        )
    return pending


def _file_format(entry: dict) -> str:
    if entry.get("format"):
        return entry["format"]
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


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _typed(raw: SparkColumn, sql_type: str) -> SparkColumn:
    if sql_type in INTEGER_TYPES:  # a plain cast would truncate 1.5 to 1 with ANSI off
        return F.when(raw.rlike(r"^\s*[+-]?[0-9]+\s*$"), raw.cast(sql_type))
    return raw.cast(sql_type)


@dataclass(frozen=True)
class _Entry:
    """A file of a pending batch, with what staging puts on each of its rows."""

    file: LandedFile
    kind: str
    ordinal: int
    manifest: dict


def _entries(pending: list[dict]) -> list[_Entry]:
    entries: list[_Entry] = []
    for ordinal, m in enumerate(pending, start=1):
        for e in m["files"]:
            path = f"{m['_folder']}/{m['batch_id']}/{e['path']}"
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
        raise _fail(exc.file.batch_id, f"file {exc.file.entry} cannot be read: {_first_line(exc.cause)}") from exc
    for e in entries:
        f = e.file
        columns = found[f.key].names if f.key in found else frames[f.key].columns[:-2]
        required, allowed = _expected_columns(spec, e.kind)
        if twice := sorted({c for c in columns if columns.count(c) > 1}):
            raise _fail(f.batch_id, f"{e.kind} file {f.entry} names column(s) {', '.join(twice)} more than once")
        if missing := sorted(required - set(columns)):
            raise _fail(f.batch_id, f"{e.kind} file {f.entry} lacks column(s) {', '.join(missing)}")
        if unknown := sorted(set(columns) - allowed):
            raise _fail(f.batch_id, f"{e.kind} file {f.entry} has unknown column(s) {', '.join(unknown)}")
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


def _stage_rows(spark: SparkSession, spec: TableSpec, pending: list[dict]) -> DataFrame | None:
    """The rows of every file of the pending batches, typed, with the merge's metadata columns
    (not yet validated)."""
    entries = _entries(pending)
    if not entries:
        return None
    raw = _read_files(spark, spec, entries)
    wanted = [c.name for c in spec.columns] + [START, END, ACTIVE, SYNCED, EARLIEST]
    raw = raw.select(
        *[F.col(f"`{c}`") if c in raw.columns else F.lit(None).cast("string").alias(c) for c in wanted],
        "_lh_file_key",
        "_lh_row",
    ).join(F.broadcast(_file_table(spark, spec, entries)), "_lh_file_key")
    null_token, unmodified_token = F.col("_lh_null_token"), F.col("_lh_unmodified_token")

    def value(name: str, sql_type: str) -> SparkColumn:
        cell = F.col(f"`{name}`")
        return F.when((cell == null_token) | (cell == unmodified_token), None).otherwise(_typed(cell, sql_type))

    types = {c.name: c.type for c in spec.columns} | {
        START: "timestamp",
        END: "timestamp",
        ACTIVE: "boolean",
        SYNCED: "timestamp",
        EARLIEST: "boolean",
    }
    unmodified = F.filter(
        F.array(*[F.when(F.col(f"`{c.name}`") == unmodified_token, F.lit(c.name)) for c in spec.data_columns]),
        lambda name: name.isNotNull(),
    )
    # A cell that is text (not a token) but does not convert: the first such column, per row.
    bad_cell = F.coalesce(
        *[
            F.when(
                F.col(f"`{name}`").isNotNull()
                & (F.col(f"`{name}`") != null_token)
                & (F.col(f"`{name}`") != unmodified_token)
                & value(name, sql_type).isNull(),
                F.concat(F.lit(f"column {name}: {sql_type} expected, found "), F.to_json(F.array(F.col(f"`{name}`")))),
            )
            for name, sql_type in types.items()
        ]
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
        F.lit(None).cast("string").alias("_lh_truncate_mode"),
        F.lit(None).cast("timestamp").alias("_lh_truncate_before"),
        F.lit(None).cast("string").alias("_lh_change_op"),
        F.lit(None).cast("string").alias("_lh_change_column"),
        "_lh_file",
        "_lh_row",
        bad_cell.alias("_lh_bad_cell"),
        _token_misuse(spec, unmodified_token, null_token).alias("_lh_misuse"),
    )


def _token_misuse(spec: TableSpec, unmodified_token: SparkColumn, null_token: SparkColumn) -> SparkColumn:
    """What a row does with the tokens that it may not: unmodified outside update data columns,
    NULL or unmodified in key columns, missing system values."""
    kind = F.col("_lh_kind")
    checks = []
    for name in spec.key:
        cell = F.col(f"`{name}`")
        checks.append(F.when(cell.isNull() | (cell == null_token), F.lit(f"key column {name} is NULL")))
        checks.append(F.when(cell == unmodified_token, F.lit(f"key column {name} holds unmodified_string")))
    for c in spec.data_columns:
        checks.append(
            F.when(
                (kind != "update") & (F.col(f"`{c.name}`") == unmodified_token),
                F.concat(F.lit(f"column {c.name} holds unmodified_string in a "), kind, F.lit(" file")),
            )
        )
    needs = {
        START: ("replace", "update", "earliest"),
        END: ("replace", "update", "delete"),
        ACTIVE: ("replace", "update"),
    }
    needs |= {SYNCED: ("replace", "update")}
    for name, kinds in needs.items():
        cell = F.col(f"`{name}`")
        checks.append(
            F.when(
                kind.isin(*kinds) & (cell.isNull() | (cell == null_token) | (cell == unmodified_token)),
                F.lit(f"system column {name} has no value"),
            )
        )
    return F.coalesce(*checks)


def validate(staged: DataFrame, spec: TableSpec, table_exists: bool = True) -> None:
    """Raise BatchError for the first problems found in the staged rows (a bounded collect)."""
    problems = (
        staged.where(F.col("_lh_misuse").isNotNull() | F.col("_lh_bad_cell").isNotNull())
        .select("_lh_batch_id", "_lh_file", "_lh_row", F.coalesce("_lh_misuse", "_lh_bad_cell").alias("problem"))
        .orderBy("_lh_sequence", "_lh_file", "_lh_row")
        .limit(5)
        .collect()
    )
    if problems:
        lines = [f"file {p._lh_file}, data row {p._lh_row}: {p.problem}" for p in problems]
        raise _fail(problems[0]._lh_batch_id, "; ".join(lines))
    key_columns = [F.col(f"`{k}`") for k in spec.key]
    duplicates = (
        staged.where(F.col("_lh_kind").isin("replace", "update"))
        .groupBy("_lh_sequence", "_lh_batch_id", *key_columns, START)
        .agg(F.count("*").alias("n"), F.array_sort(F.collect_set("_lh_file")).alias("files"))
        .where("n > 1")
        .orderBy("_lh_sequence")
        .limit(1)
        .collect()
    )
    if not table_exists:
        _check_updates_of_a_new_table(staged, spec)
    if duplicates:
        d = duplicates[0]
        key = ", ".join(f"{k}={d[k]!r}" for k in spec.key)
        raise _fail(
            d._lh_batch_id,
            f"key ({key}) has {d.n} versions with the same _fivetran_start {d[START]} in {', '.join(d.files)}",
        )


def _check_updates_of_a_new_table(staged: DataFrame, spec: TableSpec) -> None:
    """An update changes a row the table holds. Before the table's first batch is applied there
    is none, so an update row of the first batch needs an earlier replace row of its key in that
    batch; otherwise the batch was meant for a table that does not exist here."""
    key_columns = [F.col(f"`{k}`") for k in spec.key]
    before = Window.partitionBy(*key_columns).orderBy(START).rowsBetween(Window.unboundedPreceding, -1)
    orphans = (
        staged.where((F.col("_lh_ordinal") == 1) & F.col("_lh_kind").isin("replace", "update"))
        .withColumn("_lh_replaced_before", F.max((F.col("_lh_kind") == "replace").cast("int")).over(before))
        .where((F.col("_lh_kind") == "update") & F.coalesce(F.col("_lh_replaced_before"), F.lit(0)).eqNullSafe(0))
        .select("_lh_batch_id", "_lh_file", "_lh_row", *key_columns)
        .orderBy("_lh_file", "_lh_row")
        .limit(1)
        .collect()
    )
    if orphans:
        o = orphans[0]
        key = ", ".join(f"{k}={o[k]!r}" for k in spec.key)
        raise _fail(
            o._lh_batch_id,
            f"file {o._lh_file}, data row {o._lh_row}: an update of key ({key}), but table {spec.table} does not "
            "exist yet and the batch brings no earlier full row (replace) of that key",
        )


def _batch_markers(spark: SparkSession, spec: TableSpec, pending: list[dict]) -> DataFrame:
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
        *[cutoff.alias(name) if name == "_lh_truncate_before" else F.col(name) for name in schema.fieldNames()],
        F.lit(None).cast("string").alias("_lh_bad_cell"),
        F.when(
            F.col("_lh_truncate_text").isNotNull() & cutoff.isNull(),
            F.concat(F.lit("truncate before: a timestamp expected, found "), F.to_json(F.array("_lh_truncate_text"))),
        ).alias("_lh_misuse"),
    )


def _schema_change_rows(spark: SparkSession, spec: TableSpec, pending: list[dict]) -> DataFrame | None:
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
    meta = _batch_markers(spark, spec, pending).select("_lh_ordinal", *BATCH_META)
    at = F.col("_lh_at").cast("timestamp")
    types = {c.name: c.type for c in spec.columns}
    target = {
        name: F.when(F.col("_lh_change_column") == name, _typed(F.col("_lh_default"), t)) for name, t in types.items()
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
        *spec.staged_schema().fieldNames(),
        F.lit(None).cast("string").alias("_lh_bad_cell"),
        F.coalesce(
            F.when(
                at.isNull(), F.concat(label, F.lit("at: a timestamp expected, found "), F.to_json(F.array("_lh_at")))
            ),
            bad_default,
        ).alias("_lh_misuse"),
    )


def register_pending_batches(
    spark: SparkSession,
    view: str,
    landing_root: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[Sequence[str]],
    transactions: str | None = None,
) -> None:
    """Entry point for dbt (`adapter.call_python`): stage, validate and register the pending
    batches of `table` as the temp view `view`."""
    spec = TableSpec(table=table, key=tuple(key), columns=spec_columns(columns))
    staged = stage_pending_batches(spark, landing_root, spec, transactions)
    staged.createOrReplaceTempView(view)


def applied_batches(spark: SparkSession, transactions: str | None, table: str) -> Applied:
    """Read the transactions table (None or missing: nothing applied yet)."""
    if transactions is None or not spark.catalog.tableExists(transactions):
        return Applied(frozenset(), None)
    recorded = spark.table(transactions)
    applied = recorded.where(F.col("source_table") == F.lit(table))
    if "operation" in recorded.columns:  # (a table of an earlier layout is refused by the merge, by name)
        applied = applied.where(F.col("operation") == "batch")  # not a snapshot's capture of the same table
    rows = applied.select("batch_id", "batch_sequence").collect()
    return Applied(frozenset(r.batch_id for r in rows), max((r.batch_sequence for r in rows), default=None))


def stage_pending_batches(
    spark: SparkSession, landing_root: str, spec: TableSpec, transactions: str | None = None
) -> DataFrame:
    """The typed, validated rows of every batch of `spec.table` not yet applied, in batch order.
    `_lh_ordinal` numbers the pending batches 1, 2, ... in the order they must be applied."""
    manifests = read_manifests(spark, landing_root, spec.table)
    applied = applied_batches(spark, transactions, spec.table)
    spec = with_migrations(spec, manifests)  # also checks every schema change
    pending = pending_manifests(manifests, spec, applied)
    if not pending:
        return spark.createDataFrame([], spec.staged_schema())
    changes = _schema_change_rows(spark, spec, pending)
    rows = _stage_rows(spark, spec, pending)
    staged = reduce(
        DataFrame.unionByName,
        ([rows] if rows is not None else [])
        + [_batch_markers(spark, spec, pending)]
        + ([changes] if changes is not None else []),
    )
    try:
        # The files are read once: validation and the history merge read this copy.
        staged = staged.localCheckpoint()
        validate(staged, spec, table_exists=applied.last_sequence is not None)
    except BatchError:
        raise
    except Exception as exc:  # e.g. a truncated gzip member surfaces when the file is scanned
        raise BatchError(f"Batches {', '.join(m['batch_id'] for m in pending)}: {_first_line(exc)}") from exc
    return staged.drop("_lh_bad_cell", "_lh_misuse")


def spec_columns(columns: Sequence[Sequence[str]]) -> tuple[Column, ...]:
    return tuple(Column(name, sql_type) for name, sql_type in columns)
