"""The manifests of a landed table's batches: read, checked, and which of them are pending."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from lakehistory.names import RESERVED, STAGING_PREFIX, collisions
from lakehistory.transaction_parts import each_part

from .batch import Column
from .folders import Folders
from .spec import (
    FORMAT_VERSION,
    KINDS,
    SAFE_NAME,
    SCHEMA_OPS,
    BatchError,
    TableSpec,
    batch_error,
    conform,
    is_plain_name,
    spark_type,
)
from .syncs import SYNC_SCHEMA, check_sync

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
        StructField("sync", SYNC_SCHEMA),
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


@dataclass(frozen=True)
class Applied:
    """What the transactions table says about a table: applied batch ids, the last sequence, and
    the schema changes of every applied batch, in batch order, as pseudo-manifests (batch id,
    sequence, `schema_changes`: what with_migrations reads). `recorded_changes` is None when a
    batch was recorded without them, by an earlier version of lakehistory: the table's landed
    manifests, every one of them, then say what they were."""

    batch_ids: frozenset[str]
    last_sequence: int | None
    recorded_changes: tuple[dict[str, Any], ...] | None = ()
    last_edit: str | None = None  # the batch id of the last edit recorded (landing/edits.py, read_after)


@dataclass(frozen=True)
class Landed:
    """A table's landed manifests that a run reads (its pending batches', or every batch's when
    `applied.recorded_changes` is None) and what the transactions table says of its batches."""

    manifests: list[dict[str, Any]]
    applied: Applied


def recorded_schema_changes(manifest: Mapping[str, Any]) -> str:
    """A manifest's schema changes as its transaction records them (JSON text: each change's op,
    column and type, in order; `[]` for none), so that later runs learn the table's columns from
    the transactions table instead of reading every applied batch's manifest again."""
    changes = manifest.get("schema_changes") or []
    return json.dumps([{k: c.get(k) for k in ("op", "column", "type")} for c in changes], ensure_ascii=False)


# A stream: a landed table (its folder under a landing root) as one history table applies it. What
# is applied is the history table's own record, so two history models of one landed table, and
# two landing roots (two sources) with a table of the same name, each apply every batch. None for
# the history table: applied by any (a reader of the landing that is no history model).
Stream = tuple[str, str | None]


def read_landed(
    spark: SparkSession, transactions: str | None, landing_root: str, tables: Iterable[str | Stream]
) -> dict[Any, Landed | BatchError]:
    """For each of `tables` under `landing_root` (a table's name, or a Stream: the name and the
    history table that applies it): its Landed, the manifests parsed (not yet checked:
    pending_manifests does that), keyed as asked. A table whose manifests are bad gets its
    BatchError, which leaves the others readable. One listing of each table's folder
    (folders.py), one aggregate of the transactions table and one Spark job that reads the
    manifests, for all of them; a landed batch already applied costs no request beyond its name
    in the listing."""
    root = landing_root.rstrip("/")
    asked = {item: (item, None) if isinstance(item, str) else (item[0], item[1]) for item in tables}
    folders = Folders(spark, root, {table for table, _ in asked.values()})
    applied = applied_by_stream(spark, transactions, folders.names, set(asked.values()))
    wanted: dict[str, set[str]] = {table: set() for table in folders.tables}
    for table, history in asked.values():
        recorded = applied[(table, history)]
        names = folders.names[table]
        wanted[table].update(n for n in names if recorded.recorded_changes is None or n not in recorded.batch_ids)
    read = folders.manifests(wanted)
    parsed: dict[str, list[dict[str, Any]] | BatchError] = {}
    for table in folders.tables:
        manifests = []
        try:
            for name, content in sorted(read.get(table, {}).items()):
                if isinstance(content, BatchError):
                    raise content
                if content is not None:  # None: a folder that holds no file
                    # The bytes, parsed here: Spark's JSON reader would turn a truncated file or a
                    # field of the wrong type into NULLs, and say nothing of where the text went wrong.
                    where = {"_folder": f"{root}/{table}", "_folder_name": name}
                    manifests.append(parse_manifest(name, content) | where)
        except BatchError as exc:
            parsed[table] = exc
            continue
        parsed[table] = manifests
    found: dict[Any, Landed | BatchError] = {}
    for item, (table, history) in asked.items():
        got = parsed[table]
        if isinstance(got, BatchError):
            found[item] = got
            continue
        recorded = applied[(table, history)]
        # another stream of the table may have asked for manifests this one has applied
        mine = [m for m in got if recorded.recorded_changes is None or m["_folder_name"] not in recorded.batch_ids]
        found[item] = Landed(mine, recorded)
    return found


def parse_manifest(folder: str, content: bytes) -> dict[str, Any]:
    """A manifest's fields, each of its declared type (MANIFEST_SCHEMA; an absent field is None),
    or a BatchError that says what is wrong and where."""
    try:
        body = json.loads(content.decode("utf-8"))
        # commit_json (seed 002) is any JSON the source sends: kept as JSON text, not typed
        commit_json = body.pop("commit_json", None) if isinstance(body, dict) else None
        manifest: dict[str, Any] = conform(folder, "manifest.json", body, MANIFEST_SCHEMA)
        manifest["commit_json"] = None if commit_json is None else json.dumps(commit_json, ensure_ascii=False)
    except UnicodeDecodeError as exc:
        raise batch_error(folder, f"manifest.json is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise batch_error(
            folder, f"manifest.json is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise batch_error(folder, "manifest.json nests its JSON deeper than a manifest can") from None
    version = manifest["format_version"]
    if version != FORMAT_VERSION:
        said = "lacks 'format_version'" if version is None else f"has format_version {version}"
        raise batch_error(folder, f"manifest.json {said}; this version of lakehistory reads format {FORMAT_VERSION}")
    return manifest


def _check_manifest(manifest: dict[str, Any], spec: TableSpec) -> None:
    folder = manifest["_folder_name"]
    if not SAFE_NAME.match(folder):
        raise batch_error(folder, "a batch id may hold only letters, digits and _ . = -")
    for field in ("table", "batch_id", "sequence", "key", "null_string", "unmodified_string", "files"):
        if manifest.get(field) in (None, ""):
            raise batch_error(folder, f"manifest.json lacks {field!r}")
    if manifest["batch_id"] != folder:
        raise batch_error(folder, f"manifest.json names batch {manifest['batch_id']!r}, but its folder is {folder!r}")
    if manifest["table"] != spec.table:
        raise batch_error(
            folder, f"manifest.json is for table {manifest['table']!r}, but this history table is {spec.table!r}"
        )
    if tuple(manifest["key"]) != spec.key:
        raise batch_error(folder, f"key {manifest['key']} does not match the table's key {list(spec.key)}")
    if manifest["null_string"] == manifest["unmodified_string"]:
        raise batch_error(folder, "null_string and unmodified_string must differ")
    if manifest.get("sync") is not None:
        check_sync(folder, "manifest.json", manifest["sync"], spec.table)
    truncate = manifest.get("truncate")
    if truncate and (truncate.get("mode") not in ("hard", "soft") or not truncate.get("before")):
        raise batch_error(folder, f"truncate needs mode 'hard' or 'soft' and a 'before' timestamp, not {truncate}")
    for entry in manifest["files"]:
        if not is_plain_name(entry.get("path")):
            raise batch_error(
                folder,
                f"file {entry.get('path')!r}: a manifest names each file by its name inside the batch folder,"
                " without folders, '..', absolute paths, ':' or URL schemes",
            )
        if entry.get("kind") not in KINDS:
            raise batch_error(
                folder, f"file {entry.get('path')!r} has kind {entry.get('kind')!r}; expected one of {KINDS}"
            )


def _check_schema_change(folder: str, index: int, change: dict[str, Any], spec: TableSpec) -> None:
    where = f"schema_changes[{index}]"
    if change.get("op") not in SCHEMA_OPS:
        raise batch_error(folder, f"{where} has op {change.get('op')!r}; expected one of {SCHEMA_OPS}")
    if not change.get("column") or not change.get("at"):
        raise batch_error(folder, f"{where} ({change['op']}) needs a 'column' and an 'at' timestamp")
    column = change["column"]
    if column in spec.key:
        raise batch_error(
            folder,
            f"{where} ({change['op']} {column}): {column} is a key column; only a data column can be added or dropped",
        )
    if collisions([column], RESERVED["history"]):
        raise batch_error(
            folder,
            f"{where} ({change['op']} {column}): {column} is a name lakehistory gives a column of its own"
            f" ({', '.join(RESERVED['history'])}, or any name starting with {STAGING_PREFIX}); only a data column"
            " can be added or dropped",
        )
    if change["op"] == "add_column":
        if not change.get("type"):
            raise batch_error(folder, f"{where} (add_column {column}) needs a 'type'")
        try:
            spark_type(change["type"])
        except Exception as exc:
            raise batch_error(
                folder, f"{where} (add_column {column}): {change['type']!r} is not a Spark SQL type"
            ) from exc


def with_migrations(spec: TableSpec, manifests: list[dict[str, Any]]) -> TableSpec:
    """The table's columns once every landed schema change is counted (rule 17): a column an
    `add_column` brings joins the table with the change's type (a column the source declares
    must be declared with that type), and every added or dropped column may be absent from files."""
    declared = {c.name: c for c in spec.columns}
    added: dict[str, Column] = {}
    migrated = set(spec.migrated)
    for manifest in sorted(manifests, key=lambda m: m.get("sequence") or 0):
        for index, change in enumerate(manifest.get("schema_changes") or [], start=1):
            if not manifest.get("_recorded"):  # a recorded change was checked when its batch was staged
                _check_schema_change(manifest["_folder_name"], index, change, spec)
            name = change["column"]
            migrated.add(name)
            if change["op"] != "add_column":
                continue
            known = declared.get(name) or added.get(name)
            if known is None:
                added[name] = Column(name, change["type"])
            elif spark_type(known.type) != spark_type(change["type"]):
                raise batch_error(
                    manifest["_folder_name"],
                    f"schema_changes[{index}] adds {name} as {change['type']}, but the table has it as {known.type}",
                )
    return dataclasses.replace(spec, columns=spec.columns + tuple(added.values()), migrated=frozenset(migrated))


def pending_manifests(manifests: list[dict[str, Any]], spec: TableSpec, applied: Applied) -> list[dict[str, Any]]:
    """The batches to apply, in batch order, after checking every manifest."""
    pending = []
    for manifest in manifests:
        _check_manifest(manifest, spec)
        if manifest["batch_id"] not in applied.batch_ids:
            pending.append(manifest)
    pending.sort(key=lambda m: m["sequence"])
    for manifest in pending:
        for index, change in enumerate(manifest.get("schema_changes") or [], start=1):
            if change["op"] == "drop_column" and change["column"] in spec.not_null:
                raise batch_error(
                    manifest["batch_id"],
                    f"schema_changes[{index}] drops column {change['column']}, which the source declares not_null:"
                    " its versions from then on would hold NULL (rule 17). Remove its not_null constraint first.",
                )
    for manifest in pending if spec.app_id_required else ():
        if not manifest.get("app_id"):
            raise batch_error(
                manifest["batch_id"],
                f"its manifest names no app_id, and feature states are built from {spec.table}: every state"
                " names the application that made it (seed 002: the application identifier must not be null)",
            )
    for earlier, later in zip(pending, pending[1:]):
        if earlier["sequence"] == later["sequence"]:
            raise batch_error(
                later["batch_id"], f"has the same sequence {later['sequence']} as batch {earlier['batch_id']}"
            )
    synced = [m for m in pending if m.get("sync")]
    for earlier, later in zip(synced, synced[1:]):
        if earlier["sync"]["sequence"] >= later["sync"]["sequence"]:
            raise batch_error(
                later["batch_id"],
                f"belongs to sync {later['sync']['id']} (sequence {later['sync']['sequence']}), which is not after"
                f" sync {earlier['sync']['id']} (sequence {earlier['sync']['sequence']}) of batch"
                f" {earlier['batch_id']}, an earlier batch of the table: a table's batches and its syncs go in"
                " the same order, one batch per sync",
            )
    if pending and applied.last_sequence is not None and pending[0]["sequence"] <= applied.last_sequence:
        first = pending[0]
        raise batch_error(
            first["batch_id"],
            f"sequence {first['sequence']} is not after the last applied sequence {applied.last_sequence}; "
            "a batch older than one already applied cannot be applied",
        )
    return pending


def applied_batches_for(
    spark: SparkSession, transactions: str | None, landed: Mapping[str, Iterable[str]]
) -> dict[str, Applied]:
    """What the transactions table says of every table of `landed` (table: its landed batch ids),
    applied by any history table (applied_by_stream)."""
    answers = applied_by_stream(spark, transactions, landed, {(table, None) for table in landed})
    return {table: answers[(table, None)] for table in landed}


def applied_by_stream(
    spark: SparkSession,
    transactions: str | None,
    landed: Mapping[str, Iterable[str]],
    streams: Iterable[Stream],
) -> dict[Stream, Applied]:
    """What the transactions table (None or missing: nothing applied yet) says of each stream of
    a table of `landed` (table: its landed batch ids), in one aggregate, whose answer is as large
    as the landing folders and the schema changes, however many batches the tables have applied."""
    streams = set(streams)
    if transactions is None or not spark.catalog.tableExists(transactions):
        return {stream: Applied(frozenset(), None) for stream in streams}
    recorded = each_part(spark.table(transactions))
    applied = recorded.where(F.col("source_table").isin(*sorted(landed)))
    # not a snapshot's capture of the same table (a table of an earlier layout, without the
    # column, is refused by the merge, by name)
    operation = F.col("operation") if "operation" in recorded.columns else F.lit("batch")
    applied = applied.where(operation.isin("batch", "edit"))
    batch = operation == "batch"
    # Any table's landed ids: a table's answer may then hold an id that only another table landed,
    # which says nothing of its own pending batches (those it landed and that are not applied).
    ids = sorted({batch_id for table_ids in landed.values() for batch_id in table_ids})
    changes = F.col("schema_changes") if "schema_changes" in recorded.columns else F.lit(None).cast("string")
    found = (
        applied.groupBy("source_table", "history_table")
        .agg(
            F.collect_set(F.when(F.col("batch_id").isin(*ids), F.col("batch_id"))).alias("ids"),
            F.max(F.when(batch, F.col("batch_sequence"))).alias("last"),
            F.max(F.when(~batch, F.struct(F.col("txn_id"), F.col("batch_id")))).alias("last_edit"),
            F.collect_list(
                F.when(
                    batch & (changes != "[]"),
                    F.struct(F.col("batch_sequence"), F.col("batch_id"), changes.alias("changes")),
                )
            ).alias("changes"),
            F.bool_or(batch & changes.isNull()).alias("unrecorded"),
        )
        .collect()  # a row per landed table and history table
    )
    answers = {}
    for table, history in streams:
        rows = [r for r in found if r.source_table == table and (history is None or _same(r.history_table, history))]
        answers[(table, history)] = _applied(rows)
    return answers


def _same(relation: str, other: str) -> bool:
    """Whether two spellings of a relation (quoted or not, any case) name one table."""
    return relation.replace("`", "").lower() == other.replace("`", "").lower()


def _applied(rows: list[Any]) -> Applied:
    """One stream's answer, from its aggregate rows (several for a stream applied by any table)."""
    if not rows:
        return Applied(frozenset(), None)
    ids = frozenset(i for r in rows for i in r.ids)
    last = max((r.last for r in rows if r.last is not None), default=None)
    latest = max((r.last_edit for r in rows if r.last_edit is not None), default=None)  # by transaction
    last_edit = None if latest is None else str(latest.batch_id)
    if any(r.unrecorded for r in rows):
        return Applied(ids, last, None, last_edit)
    return Applied(ids, last, _recorded([c for r in rows for c in r.changes]), last_edit)


def _recorded(changes: list[Any]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"_folder_name": c.batch_id, "batch_id": c.batch_id, "sequence": c.batch_sequence, "_recorded": True}
        | {"schema_changes": json.loads(c.changes)}
        for c in sorted(changes, key=lambda c: c.batch_sequence)
    )
