"""People's edits of a main table, staged as batches of its history table.

A main table (the `main_table` strategy, lakehistory/main_table.py) is a Delta table with Change
Data Feed on, which people correct with plain SQL. Every commit of it that lakehistory did not make
becomes one batch of the history table it is built from: a transaction of its own (operation
`edit`), with the commit's author, application and time, applied by the same rules as a landed
batch. Per key of the commit:

- a row it inserted or updated: a version with those values that starts at the commit's time
  and is the key's earliest of the batch (spec rule 6), so that it ends the version before it;
- a row it deleted (and did not insert again): a deletion at the commit's time (its
  `_fivetran_end` 1 ms before, as for a landed delete, so that `mod_time` is the commit's time);
- a row it rewrote with the same values: nothing.

The main table's Delta version is the batch's sequence (`batch_sequence` in the transactions
table): the next run reads the commits after the last one its history table recorded, so an edit
made while a run applies is read by the next one. The product marks its own commits of the main
table (`own_commit_metadata`) and never reads them as edits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F

from lakehistory.history.lock import say
from lakehistory.names import ACTIVE, EARLIEST, END, START, SYNCED
from lakehistory.sql import q

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
    operation: str
    author: str | None
    app_id: str | None
    commit_message: str

    @property
    def batch_id(self) -> str:
        return f"{EDIT_BATCH_PREFIX}{self.version}"


def edit_commits(spark: SparkSession, main: str, after: int | None) -> list[EditCommit]:
    """The commits of `main` after Delta version `after` that may change rows and that lakehistory
    did not make, oldest first; none when the table does not exist. The author is the commit's
    userMetadata (its text, or the `author` of a JSON object), else its userName (which OSS Delta
    leaves empty); the application is the JSON's `app_id`, else the engine that committed."""
    if not spark.catalog.tableExists(main):
        return []
    history = spark.sql(f"describe history {main}")
    if after is not None:
        history = history.where(F.col("version") > F.lit(after))
    found = []
    for r in history.select("version", "operation", "userMetadata", "userName", "engineInfo").collect():
        meta = _metadata(r.userMetadata)
        if OWN_COMMIT_KEY in meta or r.operation in NO_DATA_OPERATIONS:
            continue
        author = meta.get("author") or r.userName
        message = meta.get("message") or f"{r.operation} of {main} (Delta version {r.version})"
        found.append(
            EditCommit(
                version=int(r.version),
                operation=str(r.operation),
                author=None if author is None else str(author),
                app_id=str(meta.get("app_id") or r.engineInfo or "") or None,
                commit_message=str(message),
            )
        )
    return sorted(found, key=lambda c: c.version)


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


def staged_edits(
    spark: SparkSession, main: str, spec: TableSpec, commits: Sequence[EditCommit], first_ordinal: int
) -> DataFrame:
    """The edits of `commits` as staged rows (the schema of spec.staged_schema): per commit, a
    marker row and a replace or delete row per key it changed, ordinals from `first_ordinal` on."""
    changes = None
    for lo, hi in _segments([c.version for c in commits]):
        part = spark.sql(f"select * from table_changes({_string(main)}, {lo}, {hi})")
        changes = part if changes is None else changes.unionByName(part)
    assert changes is not None
    key = [q(k) for k in spec.key]
    present = set(changes.columns)
    data = [c.name for c in spec.columns]
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
    for doubled in per_key.where("posts > 1").limit(3).collect():
        say(_doubled_message(main, spec, doubled))
    meta = spark.createDataFrame(
        [
            (c.version, first_ordinal + i, c.batch_id, c.author, c.app_id, c.commit_message)
            for i, c in enumerate(commits)
        ],
        "version bigint, ordinal bigint, batch_id string, author string, app_id string, message string",
    )
    millisecond = F.expr("interval 1 millisecond")
    kind = F.when(F.col("posts") == 0, F.lit("delete")).otherwise(F.lit("replace"))
    rows = (
        per_key.where("not (posts = 1 and pre is not null and to_json(post) <=> to_json(pre))")
        .join(meta, "version")
        .select(
            *[
                F.coalesce(F.col("post")[n], F.col("pre")[n]).alias(n) if n in spec.key else F.col("post")[n].alias(n)
                for n in data
            ],
            F.when(kind == "replace", F.col("at")).alias(START),
            F.when(kind == "replace", F.lit(OPEN_END_TEXT).cast("timestamp"))
            .otherwise(F.col("at") - millisecond)
            .alias(END),
            (kind == "replace").alias(ACTIVE),
            F.col("at").alias(SYNCED),
            # the key's one version of the commit is its earliest (rule 6): the rules close its
            # active row at the commit's time
            F.when(kind == "replace", F.lit(True)).alias(EARLIEST),
            kind.alias("_lh_kind"),
            "ordinal",
            "batch_id",
            "version",
            F.row_number().over(_by_key(spec)).alias("_lh_row"),
        )
    )
    markers = meta.select(
        *[F.lit(None).cast(c.type).alias(c.name) for c in spec.columns],
        F.lit(None).cast("timestamp").alias(START),
        F.lit(None).cast("timestamp").alias(END),
        F.lit(None).cast("boolean").alias(ACTIVE),
        F.lit(None).cast("timestamp").alias(SYNCED),
        F.lit(None).cast("boolean").alias(EARLIEST),
        F.lit("batch").alias("_lh_kind"),
        "ordinal",
        "batch_id",
        "version",
        F.lit(0).cast("bigint").alias("_lh_row"),
    )
    both = rows.unionByName(markers).join(meta.select("ordinal", "author", "app_id", "message"), "ordinal")
    staging = {
        "_lh_unmodified": F.array().cast(STAGING_TYPES["_lh_unmodified"]),
        "_lh_source_table": F.lit(spec.table),
        "_lh_kind": F.col("_lh_kind"),
        "_lh_batch_id": F.col("batch_id"),
        "_lh_sequence": F.col("version"),
        "_lh_ordinal": F.col("ordinal"),
        "_lh_has_earliest_file": F.lit(False),
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
        EARLIEST,
        *[staging.get(name, F.lit(None)).cast(t).alias(name) for name, t in STAGING_TYPES.items()],
    )


def _by_key(spec: TableSpec) -> WindowSpec:
    return Window.partitionBy("ordinal").orderBy(*[q(k) for k in spec.key])


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _doubled_message(main: str, spec: TableSpec, row: Any) -> str:
    keys = ", ".join(f"{k} = {row[k]!r}" for k in spec.key)
    return (
        f"{main}: Delta version {row.version} wrote {row.posts} rows of {keys}, but a main table holds one row per"
        f" key ({', '.join(spec.key)}): the history takes the greatest of them (by their values as JSON), and the"
        " main table keeps that one row from this run on. Edit the key again to give it other values."
    )


def last_recorded(spark: SparkSession, transactions: str, history: str) -> int | None:
    """The Delta version of the main table's last edit that `history` recorded (None: none)."""
    if not spark.catalog.tableExists(transactions):
        return None
    row = (
        spark.table(transactions)
        .where((F.col("history_table") == F.lit(history)) & (F.col("operation") == F.lit("edit")))
        .agg(F.max("batch_sequence"))
        .collect()[0]
    )
    return None if row[0] is None else int(row[0])
