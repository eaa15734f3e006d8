"""People's edits of a main table, staged as batches of its history table.

A main table (the `main_table` strategy, lakehistory/main_table.py) is a Delta table with Change
Data Feed on, which people correct with plain SQL. Every commit of it that lakehistory did not make
becomes one batch of the history table it is built from: a transaction of its own (operation
`edit`), with the commit's author, application and time, applied by the same rules as a landed
batch. Per key of the commit:

- a row it inserted: a version with those values that starts at the commit's time;
- a row it updated: a version that starts at the commit's time with the cells the commit changed,
  over the key's version at that time (an update row, rule 10: a landed version the main table
  did not show yet keeps the cells the person did not touch), or the whole row when the key has
  no version before that time;
- a row it deleted (and did not insert again): a deletion at the commit's time (the version
  before it ends 1 ms before, as for a landed delete, so that `mod_time` is the commit's time);
- a row it rewrote with the same values: nothing.

An edit is a version in time like any other: the batch restates the key from the commit's time
on (an earliest row, spec rules 6 to 8), sending again the versions the history table holds that
start later (a source that dates a change ahead), so that they stay after it; and a run applies
its edits among its landed batches by their times (`placed`).

The main table's Delta version is the batch's sequence (`batch_sequence` in the transactions
table), and its batch id names the table's Delta id and version (`edit:<id>:<version>`): the next
run reads the commits after the last one its history table recorded of that same table, so an
edit made while a run applies is read by the next one, and a main table dropped and built again
(its versions start again at 0) has every edit of its own read. Commits not read yet whose log or
change data files Delta removed are refused, naming the versions. The product marks its own commits of the main
table (`own_commit_metadata`) and never reads them as edits.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.invocation import say
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED
from lakehistory.sql import lit, q

from .rows import OPEN_END_TEXT
from .spec import STAGING_TYPES, TableSpec

EDIT_BATCH_PREFIX = "edit:"  # a landed batch id is a plain name (spec.SAFE_NAME): never one of these
OWN_COMMIT_KEY = "lakehistory_main_table"
# Commits that change no row: never edits, so that one of them does not hold back the next read.
NO_DATA_OPERATIONS = frozenset(
    {
        "CREATE TABLE",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "ADD COLUMNS",
        "CHANGE COLUMN",
        "REPLACE COLUMNS",
        "RENAME COLUMN",
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "UPGRADE PROTOCOL",
        "REORG",
        "SET TABLE COMMENT",
    }
)
_POST = ("insert", "update_postimage")


def own_commit_metadata(invocation_id: str) -> str:
    """The userMetadata of lakehistory's own commits of a main table."""
    return json.dumps({OWN_COMMIT_KEY: {"invocation_id": invocation_id}})


def _metadata(user_metadata: str | None) -> dict[str, Any]:
    """A commit's userMetadata as an object: a JSON object as it is, other text as the author."""
    if not user_metadata:
        return {}
    try:
        parsed = json.loads(user_metadata)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"author": user_metadata}


@dataclass(frozen=True)
class EditCommit:
    """A commit of the main table that lakehistory did not make."""

    version: int
    at: dt.datetime  # the commit's time (session time zone, as Spark gives it)
    operation: str
    author: str | None
    app_id: str | None
    commit_message: str
    table_id: str  # the main table's Delta id: a table made anew under the same name has another

    @property
    def batch_id(self) -> str:
        return f"{EDIT_BATCH_PREFIX}{self.table_id}:{self.version}"


def read_after(last_edit: str | None, table_id: str) -> int | None:
    """The main table's Delta version whose commits are read already, from the batch id of the
    last edit its history table recorded (`edit:<table id>:<version>`; `edit:<version>` before
    the id was recorded, of the same table): None when none was, or when it was a commit of a
    table that has been made anew since (the new one's versions start again at 0)."""
    if last_edit is None:
        return None
    parts = last_edit.removeprefix(EDIT_BATCH_PREFIX).split(":")
    recorded_id, version = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return int(version) if recorded_id in (None, table_id) else None


def edit_commits(spark: SparkSession, main: str, last_edit: str | None) -> list[EditCommit]:
    """The commits of `main` after the last edit its history table recorded (`last_edit`, its
    batch id: read_after) that may change rows and that lakehistory did not make, oldest first;
    none when the table does not exist. The author is the commit's userMetadata (its text, or the
    `author` of a JSON object), else its userName (which OSS Delta leaves empty); the application
    is the JSON's `app_id`, else the engine that committed. Refused: commits not read yet whose
    log Delta removed (its log retention), naming the versions."""
    if not spark.catalog.tableExists(main.replace("`", "")):
        return []
    table_id = str(spark.sql(f"describe detail {main}").select("id").collect()[0][0])  # one row
    after = read_after(last_edit, table_id)
    history = spark.sql(f"describe history {main}")
    if after is not None:
        history = history.where(F.col("version") > F.lit(after))
    found = []
    for r in history.select("version", "timestamp", "operation", "userMetadata", "userName", "engineInfo").collect():
        meta = _metadata(r.userMetadata)
        if OWN_COMMIT_KEY in meta or r.operation in NO_DATA_OPERATIONS:
            continue
        author = meta.get("author") or r.userName
        message = meta.get("message") or f"{r.operation} of {main} (Delta version {r.version})"
        found.append(
            EditCommit(
                version=int(r.version),
                at=r.timestamp,
                operation=str(r.operation),
                author=None if author is None else str(author),
                app_id=str(meta.get("app_id") or r.engineInfo or "") or None,
                commit_message=str(message),
                table_id=table_id,
            )
        )
    found.sort(key=lambda c: c.version)
    kept = history.agg(F.min("version")).collect()[0][0]  # the oldest version whose log is kept
    if after is not None and kept is not None and kept > after + 1:
        raise HistoryError(_gone_message(main, after + 1, int(kept) - 1, "its log was removed (Delta's log retention)"))
    return found


def _gone_message(main: str, first: int, last: int, why: str) -> str:
    return (
        f"{main}: the edits of Delta versions {first} to {last} were not read yet, and {why}: what people"
        " changed there cannot be recorded. Nothing was applied. Restore those versions' files; or drop the"
        " main table (the next run builds it from the history, without those edits) and make them again."
        " Keep the main table's log and change data files longer than the time between runs of its history"
        " model (delta.logRetentionDuration, delta.deletedFileRetentionDuration)."
    )


def _segments(versions: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of consecutive versions: the change feed is read per run, never over the product's
    own commits between them."""
    runs: list[tuple[int, int]] = []
    for v in versions:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def placed(staged: DataFrame | None, commits: Sequence[EditCommit]) -> tuple[dict[int, int], dict[int, int]]:
    """Where the edits go among the run's landed batches (`staged`, None: none), as new ordinals:
    (landed batch's ordinal -> new, edit's version -> new). The two keep their own orders; an
    edit goes before the first landed batch whose versions all start after the edit's time, so
    that of a batch and an edit of one key the later in time is applied last (spec rule 7 would
    otherwise take the later version out). Never before a batch of a sync: its id is reserved, and
    ids follow the order a table applies in."""
    landed = []
    if staged is not None:
        kind = F.col("_lh_kind")
        landed = (
            staged.groupBy("_lh_ordinal")
            .agg(
                F.coalesce(
                    F.min(F.when(kind.isin("replace", "update", "earliest"), F.col(START))),
                    F.min(F.when(kind == "delete", F.col(END))),
                ).alias("at"),
                F.bool_or(F.col("_lh_sync").isNotNull()).alias("sync"),
            )
            .orderBy("_lh_ordinal")
            .collect()  # a row per pending batch
        )
    last_sync = max((i for i, b in enumerate(landed) if b.sync), default=-1)
    batches, edits, i, j = {}, {}, 0, 0
    while i < len(landed) or j < len(commits):
        edit_first = j < len(commits) and (
            i == len(landed) or (i > last_sync and landed[i].at is not None and commits[j].at < landed[i].at)
        )
        if edit_first:
            edits[commits[j].version] = i + j + 1
            j += 1
        else:
            batches[int(landed[i]._lh_ordinal)] = i + j + 1
            i += 1
    return batches, edits


def renumbered(staged: DataFrame, ordinals: Mapping[int, int]) -> DataFrame:
    """The landed batches' rows with the ordinals `placed` gave them."""
    spark = staged.sparkSession
    moves = spark.createDataFrame(list(ordinals.items()), "_lh_ordinal bigint, _lh_new_ordinal bigint")
    return (
        staged.join(F.broadcast(moves), "_lh_ordinal")
        .withColumn("_lh_ordinal", F.col("_lh_new_ordinal"))
        .select(*staged.columns)
    )


def staged_edits(
    spark: SparkSession,
    main: str,
    spec: TableSpec,
    commits: Sequence[EditCommit],
    ordinals: Mapping[int, int],
    history: str,
    current: str,
    landed: DataFrame | None = None,
) -> DataFrame:
    """The edits of `commits` as staged rows (the schema of spec.staged_schema), each commit a
    batch at its ordinal of `ordinals` (version -> ordinal): a marker row, and per key it changed an
    earliest row at the commit's time (rule 6: the rules close the key's version before it, and
    take out those after it) and its new version, or, for a key it deleted that has no later
    version, a delete row; the versions of the key in the history table `history` (`current`: SQL
    true of its rows still current, alias `h`) that start later are sent again as they are, and
    the new version ends where the next starts. `landed`: the run's landed batches' staged rows,
    in their new order (`renumbered`): the versions a batch the edit must follow (a sync's, whose id
    is reserved) brings after the edit's time are sent again too, so they stay after it."""
    changes = None
    for lo, hi in _segments([c.version for c in commits]):
        part = spark.sql(f"select * from table_changes({lit(main)}, {lo}, {hi})")
        changes = part if changes is None else changes.unionByName(part)
    assert changes is not None
    key = [q(k) for k in spec.key]
    present = set(changes.columns)
    image = F.struct(
        *[(F.col(q(c.name)) if c.name in present else F.lit(None)).cast(c.type).alias(c.name) for c in spec.columns]
    )
    post = F.col("_change_type").isin(*_POST)
    # JSON text orders and compares any value (Spark compares no map): the images are chosen
    # and told apart by it.
    text = F.to_json(image)
    per_key = changes.groupBy(F.col("_commit_version").alias("version"), *key).agg(
        F.max("_commit_timestamp").alias("at"),
        F.count_if(post).alias("posts"),
        F.max_by(image, F.when(post, text)).alias("post"),
        F.max_by(image, F.when(~post, text)).alias("pre"),
    )
    # As many rows as the edits changed: read from the change feed once, for every use below.
    try:
        per_key = per_key.localCheckpoint()
    except Exception as exc:
        if "FILE_NOT_EXIST" not in str(exc) and "FileNotFound" not in str(exc):
            raise
        first, last = commits[0].version, commits[-1].version
        raise HistoryError(_gone_message(main, first, last, "a VACUUM removed their change data files")) from None
    for doubled in per_key.where("posts > 1").limit(3).collect():
        say(_doubled_message(main, spec, doubled))
    meta = spark.createDataFrame(
        [(c.version, ordinals[c.version], c.batch_id, c.author, c.app_id, c.commit_message) for c in commits],
        "version bigint, ordinal bigint, batch_id string, author string, app_id string, message string",
    )
    changed = per_key.where("not (posts = 1 and pre is not null and to_json(post) <=> to_json(pre))").join(
        meta, "version"
    )
    # The edited keys' versions the edit meets: the history table's, and those a landed batch the
    # edit must follow brings; a few rows per key, read once for the three uses below.
    reached = _stored_versions(spark, changed, spec, history, current)
    if landed is not None:
        reached = reached.unionByName(_landed_versions(landed, changed, spec))
    reached = reached.localCheckpoint()
    later = reached.where(F.col(START) > F.col("_lh_at")).drop("_lh_at")
    next_start = later.groupBy("ordinal", *key).agg(F.min(START).alias("next_start"))
    based = reached.where(F.col(START) < F.col("_lh_at")).select("ordinal", *key, F.lit(True).alias("based"))
    changed = changed.join(next_start, ["ordinal", *spec.key], "left").join(
        based.distinct(), ["ordinal", *spec.key], "left"
    )
    millisecond = F.expr("interval 1 millisecond")
    data = [c.name for c in spec.columns]

    # An edit of a row the key had changes the cells the commit changed, over the key's version at
    # the edit's time (rule 10's unmodified cells): a landed version the main table did not show
    # yet keeps what the person did not touch. A row the commit inserted, or one of a key with no
    # version before the edit's time (the source dates its first version ahead), is whole.
    kept = [c.name for c in spec.data_columns]
    unchanged = F.filter(
        F.array(*[F.when(F.col("post")[n].eqNullSafe(F.col("pre")[n]), F.lit(n)) for n in kept]),
        lambda name: name.isNotNull(),
    )
    edited = F.col("pre").isNotNull() & F.coalesce(F.col("based"), F.lit(False))
    no_columns = F.array().cast(STAGING_TYPES["_lh_unmodified"])
    versions = changed.where("posts > 0").select(
        *[F.col("post")[n].alias(n) for n in data],
        F.col("at").alias(START),
        F.coalesce(F.col("next_start") - millisecond, F.lit(OPEN_END_TEXT).cast("timestamp")).alias(END),
        F.col("next_start").isNull().alias(ACTIVE),
        F.col("at").alias(SYNCED),
        F.when(edited, F.lit("update")).otherwise(F.lit("replace")).alias("_lh_kind"),
        F.when(edited, unchanged).otherwise(no_columns).alias("_lh_unmodified"),
        "ordinal",
    )
    # A key the commit deleted is in no earliest set (rule 6) unless it has versions to send
    # again: its delete row then closes its version (rule 11), at the same time as rule 8 would.
    only_deleted = (F.col("posts") == 0) & F.col("next_start").isNull()
    earliest_or_delete = changed.select(
        *[(F.coalesce(F.col("post")[n], F.col("pre")[n]) if n in spec.key else F.lit(None)).alias(n) for n in data],
        F.when(~only_deleted, F.col("at")).alias(START),
        F.when(only_deleted, F.col("at") - millisecond).alias(END),
        F.lit(None).cast("boolean").alias(ACTIVE),
        F.lit(None).cast("timestamp").alias(SYNCED),
        F.when(only_deleted, F.lit("delete")).otherwise(F.lit("earliest")).alias("_lh_kind"),
        no_columns.alias("_lh_unmodified"),
        "ordinal",
    )
    rows = reduce(
        DataFrame.unionByName, [versions, earliest_or_delete.select(versions.columns), later.select(versions.columns)]
    )
    rows = rows.withColumn(
        "_lh_row", F.row_number().over(Window.partitionBy("ordinal").orderBy(*key, "_lh_kind", START))
    )
    markers = meta.select(
        *[F.lit(None).cast(c.type).alias(c.name) for c in spec.columns],
        F.lit(None).cast("timestamp").alias(START),
        F.lit(None).cast("timestamp").alias(END),
        F.lit(None).cast("boolean").alias(ACTIVE),
        F.lit(None).cast("timestamp").alias(SYNCED),
        F.lit("batch").alias("_lh_kind"),
        no_columns.alias("_lh_unmodified"),
        "ordinal",
        F.lit(0).cast("bigint").alias("_lh_row"),
    )
    both = rows.unionByName(markers).join(meta, "ordinal")
    staging = {
        "_lh_unmodified": F.col("_lh_unmodified"),
        "_lh_source_table": F.lit(spec.table),
        "_lh_kind": F.col("_lh_kind"),
        "_lh_batch_id": F.col("batch_id"),
        "_lh_sequence": F.col("version"),
        "_lh_ordinal": F.col("ordinal"),
        "_lh_has_earliest_file": F.lit(True),
        "_lh_author": F.col("author"),
        "_lh_app_id": F.col("app_id"),
        "_lh_commit_message": F.col("message"),
        "_lh_schema_changes": F.lit("[]"),
        "_lh_file": F.lit(main),
        "_lh_row": F.col("_lh_row"),
    }
    return both.select(
        *[F.col(q(c.name)) for c in spec.columns],
        START,
        END,
        ACTIVE,
        SYNCED,
        F.lit(None).cast("boolean").alias(EARLIEST),
        *[staging.get(name, F.lit(None)).cast(t).alias(name) for name, t in STAGING_TYPES.items()],
    )


def _stored_versions(spark: SparkSession, changed: DataFrame, spec: TableSpec, history: str, current: str) -> DataFrame:
    """The versions of the changed keys that the history table holds (still current: its
    Fivetran table), each with the edit's ordinal and time (`_lh_at`): those that start after
    it the edit's batch sends again. (The table exists: its main table, whose commits these are,
    is built from it.)"""
    first = spec.key[0]
    lo, hi = changed.agg(F.min(q(first)), F.max(q(first))).collect()[0]
    # the edited keys' range lets Delta skip the history table's files outside it
    stored = spark.table(history).alias("h").where(F.expr(current) & F.col(f"h.{q(first)}").between(lo, hi))
    present = set(stored.columns)
    edits = changed.select("ordinal", "at", *[q(k) for k in spec.key]).alias("e")
    on = [F.col(f"h.{q(k)}") == F.col(f"e.{q(k)}") for k in spec.key]
    return stored.join(edits, on).select(
        *[
            (F.col(f"h.{q(c.name)}") if c.name in present else F.lit(None)).cast(c.type).alias(c.name)
            for c in spec.columns
        ],
        *[F.col(f"h.{q(c)}").alias(c) for c in (START, END, ACTIVE, SYNCED)],
        F.lit("replace").alias("_lh_kind"),
        F.array().cast(STAGING_TYPES["_lh_unmodified"]).alias("_lh_unmodified"),
        F.col("e.ordinal").alias("ordinal"),
        F.col("e.at").alias("_lh_at"),
    )


def _landed_versions(landed: DataFrame, changed: DataFrame, spec: TableSpec) -> DataFrame:
    """The versions of the changed keys that a landed batch of the run applied before the edit
    (a lower ordinal) brings (`_stored_versions`' rows from the run's own batches)."""
    key = [q(k) for k in spec.key]
    edits = changed.select(F.col("ordinal").alias("_lh_edit"), F.col("at").alias("_lh_at"), *key)
    kept = landed.where(F.col("_lh_kind") == "replace").join(edits, list(spec.key))
    return kept.where(F.col("_lh_ordinal") < F.col("_lh_edit")).select(
        *[F.col(q(c.name)).alias(c.name) for c in spec.columns],
        START,
        END,
        ACTIVE,
        SYNCED,
        F.lit("replace").alias("_lh_kind"),
        F.array().cast(STAGING_TYPES["_lh_unmodified"]).alias("_lh_unmodified"),
        F.col("_lh_edit").alias("ordinal"),
        "_lh_at",
    )


def _doubled_message(main: str, spec: TableSpec, row: Any) -> str:
    keys = ", ".join(f"{k} = {row[k]!r}" for k in spec.key)
    return (
        f"{main}: Delta version {row.version} wrote {row.posts} rows of {keys}, but a main table holds one row per"
        f" key ({', '.join(spec.key)}): the history takes the greatest of them (by their values as JSON), and the"
        " main table keeps that one row from this run on. Edit the key again to give it other values."
    )
