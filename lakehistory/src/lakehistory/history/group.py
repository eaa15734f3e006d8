"""One group of consecutive batches: its changes computed by the rules' two queries (rules.py),
then written in one Delta commit that carries the group's transactions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.history import ledger
from lakehistory.history.layout import Layout
from lakehistory.history.one_batch import one_batch_sql
from lakehistory.history.rules import (
    CANDIDATES_VIEW,
    GROUP_VIEW,
    STORED_VIEW,
    candidates_sql,
    changes_sql,
)
from lakehistory.history.session import session_conf
from lakehistory.history.table import Versioning, current_rows
from lakehistory.landing.syncs import SyncOf
from lakehistory.names import ACTIVE, START, SYNCED
from lakehistory.sql import cols, q, same_key

ROW_KINDS = ("replace", "update", "delete", "earliest")
SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"
# Spark would build a bloom filter of the history table's keys (one more scan of it) to filter the
# group's rows, which are already few: the rules' queries run without it.
RUNTIME_BLOOM_FILTER = "spark.sql.optimizer.runtime.bloomFilter.enabled"
CHANGES_VIEW = "`__lh_changes`"
# The group's changes are a local checkpoint already (fixed, in memory): Delta's copy of a MERGE's
# source would be a Spark job and the group's rows once more in memory (ledger.MERGE_SOURCE_COPY).
MERGE_SOURCE_COPY = ledger.MERGE_SOURCE_COPY


@dataclass
class Batch:
    """A pending batch, from its staged rows."""

    ordinal: int
    batch_id: str
    sequence: int
    source_table: str
    author: str | None
    app_id: str | None
    commit_message: str | None
    commit_json: str | None
    truncate: bool
    schema_changes: tuple[tuple[int, str, str], ...]
    rows_in: int
    key_range: tuple[Any, Any]
    deleted_column: str | None = None  # the column its manifest names as the deleted column
    sync: SyncOf | None = None  # the sync its manifest says it belongs to
    recorded_schema_changes: str = "[]"  # its manifest's schema changes, as its transaction records them
    operation: str = "batch"  # or "edit": a commit of the main table (landing/edits.py); its sequence is its version

    @property
    def rewrites(self) -> bool:
        """Its truncate or schema change rewrites stored rows of any key: it starts a group."""
        return self.truncate or bool(self.schema_changes)


@dataclass
class Changes:
    frame: DataFrame
    opened: dict[int, int]
    closed: dict[int, int]
    gone: dict[int, int]
    closes_stored: bool
    clash: int | None
    interleave: int | None


def compute_changes(
    spark: SparkSession, target: str, staged: str, layout: Layout, versions: Versioning, group: list[Batch]
) -> Changes:
    first = group[0]
    spark.sql(
        f"select *, `_lh_ordinal` - {first.ordinal - 1} as `_lh_b` from {staged}"
        f" where `_lh_ordinal` between {first.ordinal} and {group[-1].ordinal}"
    ).createOrReplaceTempView(GROUP_VIEW)
    stage_stored(spark, target, layout, versions, first, key_range(group))
    with session_conf(spark, {RUNTIME_BLOOM_FILTER: "false"}):
        if len(group) == 1 and not first.rewrites:
            frame = spark.sql(one_batch_sql(layout, marks_deleted(first, layout))).localCheckpoint()
        else:
            candidates = spark.sql(candidates_sql(layout, first.schema_changes, first.truncate)).localCheckpoint()
            candidates.createOrReplaceTempView(CANDIDATES_VIEW)
            frame = spark.sql(changes_sql(layout, first.rewrites)).localCheckpoint()
    frame.createOrReplaceTempView(CHANGES_VIEW)
    return _counted(frame)


def marks_deleted(batch: Batch, layout: Layout) -> bool:
    """Whether `batch` names the model's deleted column, which the rows it closes then set."""
    return layout.deleted_column is not None and (batch.deleted_column or "").lower() == layout.deleted_column.lower()


def _counted(frame: DataFrame) -> Changes:
    """The group's changes with their counts per batch, from one aggregate of a few rows (a row
    per kind of change and batches it spans)."""
    changes = Changes(frame, opened={}, closed={}, gone={}, closes_stored=False, clash=None, interleave=None)
    rows = frame.groupBy("`_lh_action`", "`_lh_from`", "`_lh_to`", "`_lh_gone`").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("`_lh_clash`").alias("clash"),
        F.min("`_lh_interleave`").alias("interleave"),
    )
    for r in rows.collect():
        n, b_from, b_to = r["n"], r["_lh_from"], r["_lh_to"]
        if r["_lh_action"] == "insert":
            changes.opened[b_from] = changes.opened.get(b_from, 0) + n
        else:
            changes.closes_stored = True
        if b_to is not None:
            changes.closed[b_to] = changes.closed.get(b_to, 0) + n
        if r["_lh_gone"]:
            changes.gone[b_to] = changes.gone.get(b_to, 0) + n
        changes.clash = _least(changes.clash, r["clash"])
        changes.interleave = _least(changes.interleave, r["interleave"])
    return changes


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def stage_stored(
    spark: SparkSession, target: str, layout: Layout, versions: Versioning, first: Batch, key_range: tuple[Any, ...]
) -> None:
    """`__lh_stored`: the table's current rows the group reaches: those of its keys (within the
    range of the first key column, a literal bound, so Delta skips the files of other keys) and,
    for a first batch that truncates or changes the schema, those that rewrite touches."""
    row = cols(layout.row, "t")
    current = current_rows(target, layout, versions)
    k = layout.keys
    in_range = spark.sql(f"select {row} from {current} as t").where(
        F.col(q(k[0])).between(F.lit(key_range[0]), F.lit(key_range[1]))
    )
    in_range.createOrReplaceTempView("__lh_in_range")
    parts = [
        f"""
        select {row} from `__lh_in_range` as t
        left semi join (
            select distinct {cols(k)} from {q(GROUP_VIEW)} where `_lh_kind` in {ROW_KINDS}
        ) as b on {same_key("t", "b", k)}
        """
    ]
    if first.truncate:
        parts.append(
            f"""
            select {row} from {current} as t
            inner join (select * from {q(GROUP_VIEW)} where `_lh_kind` = 'batch' and `_lh_b` = 1) as m
                on t.{q(SYNCED)} < m.`_lh_truncate_before`
            """
        )
    if first.schema_changes:
        parts.append(f"select {row} from {current} as t where t.{q(ACTIVE)}")
    spark.sql("\nunion\n".join(parts)).createOrReplaceTempView(STORED_VIEW)


def version_sql(versions: Versioning, txns: list[ledger.Txn]) -> str:
    """A template: the version a group ordinal `{}` stands for (the transaction's id or time)."""
    ids = [t.txn_id for t in txns]
    if versions.version_type == "integer" and ids == list(range(ids[0], ids[0] + len(ids))):
        return f"({ids[0] - 1} + {{}})"
    if versions.version_type == "integer":  # a sync's id, reserved before ids taken since
        return f"element_at(array({', '.join(str(i) for i in ids)}), cast({{}} as int))"
    times = ", ".join(f"timestamp'{t.started_at}'" for t in txns)
    return f"element_at(array({times}), cast({{}} as int))"


def write_group(
    spark: SparkSession,
    target: str,
    layout: Layout,
    versions: Versioning,
    version: str,
    changes: Changes,
    group: list[Batch],
) -> None:
    """One commit: the MERGE that closes stored rows and inserts the new ones, or a plain append
    when no stored row closes (a first build, new keys only) or the table is append-only."""
    row = cols(layout.row)
    frame = CHANGES_VIEW
    if versions.append_only:  # every change is a new row (apply.py refuses the others)
        spark.sql(f"""
            insert into {target} ({row}, `valid_from`, `removal`)
            select {row}, {version.format("`_lh_from`")}, false from {frame} where `_lh_action` = 'insert'
        """)
        return
    to = f"coalesce({version.format('s.`_lh_to`')}, {versions.open})"
    if not changes.closes_stored:
        spark.sql(f"""
            insert into {target} ({row}, `valid_from`, `valid_to`)
            select {cols(layout.row, "s")}, {version.format("s.`_lh_from`")}, {to}
            from {frame} as s where s.`_lh_action` = 'insert'
        """)
        return
    k = layout.keys
    condition = F.expr(
        f"s.`_lh_action` = 'close' and {same_key(target, 's', k)} and {target}.{q(START)} = s.{q(START)}"
        f" and {versions.is_current(target)}"
    )
    if not group[0].rewrites:  # every row the group closes is of its keys: Delta rewrites only their files
        low, high = key_range(group)
        condition = condition & F.col(f"{target}.{q(k[0])}").between(F.lit(low), F.lit(high))
    values = {q(c): F.col(f"s.{q(c)}") for c in layout.row}
    values["`valid_from`"] = F.expr(version.format("s.`_lh_from`"))
    values["`valid_to`"] = F.expr(to)
    merge = (
        spark.table(CHANGES_VIEW)
        .where("`_lh_action` in ('close', 'insert')")
        .alias("s")
        .mergeInto(target, condition)
        .whenMatched()
        .update({"`valid_to`": F.expr(version.format("s.`_lh_to`"))})
        .whenNotMatched(F.expr("s.`_lh_action` = 'insert'"))
        .insert(values)
    )
    with session_conf(spark, {MERGE_SOURCE_COPY: "none"}):
        merge.merge()


def key_range(group: list[Batch]) -> tuple[Any, Any]:
    lows = [b.key_range[0] for b in group if b.key_range[0] is not None]
    highs = [b.key_range[1] for b in group if b.key_range[1] is not None]
    return (min(lows), max(highs)) if lows else (None, None)


def own_commit(spark: SparkSession, target: str, txns: list[ledger.Txn]) -> ledger.Commit:
    """The commit the group just made (the table's latest), checked to be ours."""
    latest = spark.sql(f"describe history {target} limit 1").collect()[0]
    committed = ledger.committed_txns(latest["userMetadata"])
    if not committed or [t.txn_id for t in committed] != [t.txn_id for t in txns]:
        raise ledger.LedgerError(
            f"{target}: the latest commit (Delta version {latest['version']}) is not the one this run just made:"
            " another process writes to this table. Run history models from one dbt invocation at a time."
        )
    return ledger.Commit(int(latest["version"]), latest["timestamp"], committed)


def _first_row(frame: DataFrame, layout: Layout, where: str) -> tuple[list[Any], Any]:
    """The key and `_fivetran_start` of one change of the first batch that `where` picks, to name it."""
    row = frame.where(where).select(*[q(k) for k in layout.keys], q(START)).first()
    return ([row[k] for k in layout.keys], row[START]) if row else ([], "?")


def append_only_message(frame: DataFrame, batch: Batch, layout: Layout) -> str:
    key, start = _first_row(frame, layout, "`_lh_to` = 1")
    return (
        f"Batch {batch.batch_id} of {batch.source_table}: it would close or remove the row of key {key} with"
        f" _fivetran_start {start} that an earlier batch wrote, and this history table is append-only (var"
        " lakehistory_append_only: Atoti's append-only case, where a reader knows valid_from only and no row is"
        " ever updated or deleted). This batch and the later ones were not applied. A table whose batches update"
        " or delete rows needs valid_to: build it with lakehistory_append_only: false."
    )


def clash_message(frame: DataFrame, batch: Batch, layout: Layout) -> str:
    key, start = _first_row(frame, layout, "`_lh_clash` = 1")
    return (
        f"Batch {batch.batch_id} of {batch.source_table}: a version of key {key} has _fivetran_start {start}, which"
        " the table already holds, and the batch gives no earliest start for the key that would replace it (spec"
        " rules 6, 7, 9). This batch and the later ones were not applied."
    )
