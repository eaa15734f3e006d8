"""The `fivetran_history` strategy's engine: applies a history table's pending batches.

    adapter.call_python('lakehistory.history.apply:apply_pending', {...})   # from the strategy macro

Per run of a history model:
1. Record what the history table committed that the transactions table lacks (ledger.py), for
   this table and, once per dbt invocation, for every history table of the project, so that no
   new transaction id can repeat an id a stopped run already committed.
2. Drop the staged batches that step 1 just recorded (staging left out those recorded before):
   which batches are applied is decided by the history tables' own commits, so a run stopped
   after its commit never applies a batch twice.
3. Apply the rest in groups of consecutive batches (rules.py): one query computes the group's
   changes, one Delta MERGE (or a plain append when no stored row closes) writes them, and the
   commit carries the group's transactions. A batch with a truncate or schema change starts a
   group (its rewrite of the stored rows reaches beyond its keys); a batch whose version clashes
   with a stored row is refused after the batches before it are applied; a batch that puts a
   version below a row still there ends its group.
4. Record the group's transactions (gap-free ids in batch order, each with its own counts).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.history import ledger
from lakehistory.history.rules import (
    CANDIDATES_VIEW,
    GROUP_VIEW,
    STORED_VIEW,
    SYSTEM,
    Layout,
    candidates_sql,
    changes_sql,
)
from lakehistory.history.sql import cols, q, same_key
from lakehistory.landing.batch import ACTIVE, END, START, SYNCED

ROW_KINDS = ("replace", "update", "delete", "earliest")
MAX_BIGINT = 9223372036854775807
MAX_TIMESTAMP = "timestamp'9999-12-31 23:59:59.999999'"
HISTORY_COLUMNS = ("valid_from", "valid_to", "removal")
SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"
# Spark would build a bloom filter of the history table's keys (one more scan of it) to filter the
# group's rows, which are already few: the rules' queries run without it.
RUNTIME_BLOOM_FILTER = "spark.sql.optimizer.runtime.bloomFilter.enabled"
CHANGES_VIEW = "`__lh_changes`"

# Which dbt invocations have checked every history table for unrecorded commits, and the tables
# whose last commit this process could not record: both are checked before any new transaction.
_recovered_invocations: set[str] = set()
_unrecorded: set[str] = set()


class HistoryError(RuntimeError):
    """A batch the rules cannot apply, or a model the strategy cannot serve."""


# The points between the statements of a run where a stop (a killed process, a lost connection)
# leaves the tables in a different state. Tests stop a run at each in turn and run it again.
STOP_POINTS = ("columns_added", "recovered", "computed", "committed", "recorded")
GROUP_STOP_POINTS = ("computed", "committed", "recorded")  # once per group


def _reached(point: str) -> None:
    """A named point of the run (see STOP_POINTS); nothing happens here."""


@dataclass(frozen=True)
class Versioning:
    """How transaction time is written (the project vars; see macros/time_travel/versioning.sql)."""

    version_type: str = "integer"  # or 'timestamp'
    open_end: str = "max"  # or 'null'
    append_only: bool = False

    @property
    def sql_type(self) -> str:
        return "bigint" if self.version_type == "integer" else "timestamp"

    @property
    def open(self) -> str:
        if self.open_end == "null":
            return "null"
        return str(MAX_BIGINT) if self.version_type == "integer" else MAX_TIMESTAMP

    def is_current(self, alias: str) -> str:
        if self.open_end == "null" or self.append_only:
            return f"{alias}.`valid_to` is null"
        return f"{alias}.`valid_to` = {self.open}"


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
    truncate: bool
    schema_changes: tuple[tuple[int, str, str], ...]
    rows_in: int
    key_range: tuple[Any, Any]

    @property
    def rewrites(self) -> bool:
        """Its truncate or schema change rewrites stored rows of any key: it starts a group."""
        return self.truncate or bool(self.schema_changes)


@dataclass
class Outcome:
    batches: int = 0
    groups: int = 0
    transactions: list[int] = field(default_factory=list)


def apply_pending(
    spark: SparkSession,
    target: str,
    staged: str,
    transactions: str,
    keys: Sequence[str],
    deleted_column: str | None,
    versioning: dict,
    uuid_sql: str,
    exists: bool,
    history_tables: Sequence[str] = (),
    invocation_id: str = "",
    max_batches_per_commit: int | None = None,
) -> dict:
    """Entry point for the strategy macro: apply the pending batches in `staged` (the model's
    rows, a view of lakehistory.landing_batches) to the history table `target`, at most
    `max_batches_per_commit` batches per group (None: as many as the rules allow)."""
    versions = Versioning(**versioning)
    layout = _layout(spark, staged, keys, deleted_column)
    if not exists:
        _create_table(spark, target, layout, versions)
    else:
        _add_new_columns(spark, target, layout)
    _reached("columns_added")
    state, recovered = _recover(spark, transactions, target, history_tables, invocation_id, uuid_sql)
    _reached("recovered")

    pending = _pending(spark, staged, recovered, layout.keys[0])
    outcome = Outcome()
    at = 0
    while at < len(pending):
        end = next((i for i in range(at + 1, len(pending)) if pending[i].rewrites), len(pending))
        if max_batches_per_commit:
            end = min(end, at + int(max_batches_per_commit))
        taken, state = _apply_group(
            spark, target, staged, transactions, layout, versions, uuid_sql, pending[at:end], state, outcome
        )
        at += taken
    return {"batches": outcome.batches, "groups": outcome.groups, "transactions": outcome.transactions}


# --- the table ---------------------------------------------------------------------------------


def _layout(spark: SparkSession, staged: str, keys: Sequence[str], deleted_column: str | None) -> Layout:
    fields = [f for f in spark.table(staged).schema.fields if not f.name.startswith("_lh_")]
    types = {f.name: f.dataType.simpleString() for f in fields}
    for system in SYSTEM:
        if system not in types:
            raise HistoryError(f"the model's rows lack {system}; select from lakehistory.landing_batches(...).")
    for key in keys:
        if key not in types:
            raise HistoryError(f"key column {key} is not a column of the model's rows.")
    data = tuple(f.name for f in fields if f.name not in keys and not f.name.startswith("_fivetran_"))
    if deleted_column and deleted_column not in data:
        raise HistoryError(f"deleted_column {deleted_column} is not a column of the model's rows.")
    return Layout(tuple(keys), data, types, deleted_column)


def _create_table(spark: SparkSession, target: str, layout: Layout, versions: Versioning) -> None:
    columns = [f"{q(c)} {layout.types[c]}" for c in (*layout.keys, *layout.data)]
    columns += [
        f"{q(START)} timestamp not null",
        f"{q(END)} timestamp not null",
        f"{q(ACTIVE)} boolean not null",
        f"{q(SYNCED)} timestamp",
        f"`valid_from` {versions.sql_type} not null comment 'First transaction this row is part of (inclusive)'",
    ]
    if versions.append_only:
        columns.append(
            "`removal` boolean not null comment 'True on a row that records that this (key, _fivetran_start) row"
            " left the table at valid_from'"
        )
        clustering = [*layout.keys[:3], "valid_from"]
    else:
        not_null = " not null" if versions.open_end == "max" else ""
        open_text = versions.open.replace("'", "")
        columns.append(
            f"`valid_to` {versions.sql_type}{not_null} comment 'Transaction that closed this row (exclusive);"
            f" open rows hold {open_text}'"
        )
        clustering = [*layout.keys[:3], "valid_to"]
    # Clustered by key (the merge reads a batch's keys) and by transaction time (as-of reads skip
    # the files of versions closed before the version asked for).
    spark.sql(
        f"create table {target} ({', '.join(columns)}) using delta cluster by ({cols(clustering)})"
        " tblproperties ('delta.enableDeletionVectors' = 'true')"
    )


def _add_new_columns(spark: SparkSession, target: str, layout: Layout) -> None:
    """Rule 17 "add the column": a column the rows bring that the table lacks joins the table
    next to the source columns (its own commit, before the group's: a rerun finds it there)."""
    stored = [f.name for f in spark.table(target).schema.fields]
    names = [*layout.keys, *layout.data]
    for name in stored:
        if name not in names and not name.startswith("_fivetran_") and name not in HISTORY_COLUMNS:
            raise HistoryError(
                f"{target} has column {name}, which the source does not declare and no landed batch adds (spec rule"
                " 17). Declare it in the source's columns with its data_type."
            )
    for i, name in enumerate(names):
        if name not in stored:
            spark.sql(f"alter table {target} add columns ({q(name)} {layout.types[name]} after {q(names[i - 1])})")


# --- what is pending ---------------------------------------------------------------------------------


def recover_transactions(
    spark: SparkSession, transactions: str, history_tables: Sequence[str], uuid_sql: str, invocation_id: str = ""
) -> None:
    """Entry point for `lakehistory.next_transaction` (snapshot captures and cleanups): record
    what any history table committed and the transactions table lacks, before a new id."""
    _recover_others(spark, transactions, set(), history_tables, invocation_id, uuid_sql)


def _recover(
    spark: SparkSession,
    transactions: str,
    target: str,
    history_tables: Sequence[str],
    invocation_id: str,
    uuid_sql: str,
) -> tuple[ledger.Recorded, set[tuple[str, str]]]:
    """Record unrecorded commits: of `target` and of the other tables (`_recover_others`).
    Returns the transactions table's state for `target` (checked last, so that its last id counts
    every other table's) and the batches just recorded, as (source table, batch id)."""
    recovered = _recover_others(spark, transactions, {target}, history_tables, invocation_id, uuid_sql)
    _unrecorded.discard(target)
    state, txns = ledger.recover(spark, transactions, target, uuid_sql)
    return state, {(t.source_table, t.batch_id) for t in recovered + txns}


def _recover_others(
    spark: SparkSession,
    transactions: str,
    skip: set[str],
    history_tables: Sequence[str],
    invocation_id: str,
    uuid_sql: str,
) -> list[ledger.Txn]:
    """Record unrecorded commits of the tables whose record this process could not write, and
    once per invocation of every history table, but those in `skip`."""
    tables = _unrecorded | (set() if invocation_id in _recovered_invocations else set(history_tables))
    recovered: list[ledger.Txn] = []
    for table in sorted(tables - skip):
        if spark.catalog.tableExists(table.replace("`", "")):
            recovered += ledger.recover(spark, transactions, table, uuid_sql)[1]
        _unrecorded.discard(table)
    _recovered_invocations.add(invocation_id)
    return recovered


def _pending(spark: SparkSession, staged: str, recovered: set[tuple[str, str]], first_key: str) -> list[Batch]:
    """The staged batches, but those just `recovered`, in batch order (one small query over the
    staged rows, which are in memory: a row per staged batch)."""
    rows = spark.sql(
        f"""
        select
            s.`_lh_ordinal` as ordinal,
            max_by(s.`_lh_batch_id`, s.`_lh_kind` = 'batch') as batch_id,
            max(s.`_lh_sequence`) as sequence,
            max(s.`_lh_source_table`) as source_table,
            max_by(s.`_lh_author`, s.`_lh_kind` = 'batch') as author,
            max_by(s.`_lh_app_id`, s.`_lh_kind` = 'batch') as app_id,
            max_by(s.`_lh_commit_message`, s.`_lh_kind` = 'batch') as commit_message,
            max(s.`_lh_truncate_mode`) is not null as truncate,
            array_sort(collect_list(named_struct('row', s.`_lh_row`, 'op', s.`_lh_change_op`,
                'column', s.`_lh_change_column`)) filter (where s.`_lh_kind` = 'schema_change')) as schema_changes,
            count_if(s.`_lh_kind` in {ROW_KINDS}) as rows_in,
            min(s.{q(first_key)}) filter (where s.`_lh_kind` in {ROW_KINDS}) as key_lo,
            max(s.{q(first_key)}) filter (where s.`_lh_kind` in {ROW_KINDS}) as key_hi
        from {staged} as s
        group by s.`_lh_ordinal`
        order by s.`_lh_ordinal`
        """
    ).collect()
    batches = [
        Batch(
            ordinal=r.ordinal,
            batch_id=r.batch_id,
            sequence=r.sequence,
            source_table=r.source_table,
            author=r.author,
            app_id=r.app_id,
            commit_message=r.commit_message,
            truncate=r.truncate,
            schema_changes=tuple((c.row, c.op, c.column) for c in r.schema_changes),
            rows_in=r.rows_in,
            key_range=(r.key_lo, r.key_hi),
        )
        for r in rows
        if (r.source_table, r.batch_id) not in recovered
    ]
    if batches and [b.ordinal for b in batches] != list(range(batches[0].ordinal, batches[-1].ordinal + 1)):
        raise HistoryError(
            "the history table holds some staged batches but not the ones before them: "
            + ", ".join(b.batch_id for b in batches)
        )
    return batches


# --- one group ---------------------------------------------------------------------------------------


@dataclass
class _Changes:
    frame: DataFrame
    opened: dict[int, int]
    closed: dict[int, int]
    gone: dict[int, int]
    closes_stored: bool
    clash: int | None
    interleave: int | None


def _apply_group(
    spark: SparkSession,
    target: str,
    staged: str,
    transactions: str,
    layout: Layout,
    versions: Versioning,
    uuid_sql: str,
    group: list[Batch],
    state: ledger.Recorded,
    outcome: Outcome,
) -> tuple[int, ledger.Recorded]:
    """Apply the longest head of `group` that forms one group; return how many batches it took
    and the transactions table's state after it."""
    n = len(group)
    while True:
        changes = _changes(spark, target, staged, layout, versions, group[:n])
        if changes.clash == 1:
            raise HistoryError(_clash_message(changes.frame, group[0], layout))
        if changes.clash is not None and changes.clash <= n:
            n = changes.clash - 1
        elif changes.interleave is not None and changes.interleave < n:
            n = changes.interleave
        else:
            break
    _reached("computed")
    times = ledger.transaction_times(state.last_started, n)
    txns = [
        ledger.Txn(
            txn_id=state.last_id + i,
            batch_id=b.batch_id,
            sequence=b.sequence,
            source_table=b.source_table,
            author=b.author,
            app_id=b.app_id,
            commit_message=b.commit_message,
            started_at=times[i - 1],
            rows_in=b.rows_in,
            versions_opened=changes.opened.get(i, 0),
            versions_closed=changes.closed.get(i, 0),
            rows_overlap_deleted=changes.gone.get(i, 0),
        )
        for i, b in enumerate(group[:n], start=1)
    ]
    version = _version_sql(versions, txns)
    # The commit carries the group's transactions; a group that changes nothing (a re-delivered
    # batch) still commits, so that its transactions are on record in the table too.
    with _session_conf(spark, {ledger.USER_METADATA: ledger.commit_metadata(txns), SKIP_EMPTY_COMMITS: "false"}):
        _write(spark, target, layout, versions, version, changes, group[:n])
    commit = _own_commit(spark, target, txns)
    try:
        _reached("committed")
        ledger.record(spark, transactions, target, [commit], uuid_sql)
    except Exception:
        _unrecorded.add(target)  # the next history run of this process records it first
        raise
    _reached("recorded")
    outcome.batches += n
    outcome.groups += 1
    outcome.transactions += [t.txn_id for t in txns]
    last = txns[-1]
    return n, ledger.Recorded(last.txn_id, dt.datetime.fromisoformat(last.started_at), last.txn_id, commit.version)


def _changes(
    spark: SparkSession, target: str, staged: str, layout: Layout, versions: Versioning, group: list[Batch]
) -> _Changes:
    first = group[0]
    spark.sql(
        f"select *, `_lh_ordinal` - {first.ordinal - 1} as `_lh_b` from {staged}"
        f" where `_lh_ordinal` between {first.ordinal} and {group[-1].ordinal}"
    ).createOrReplaceTempView(GROUP_VIEW)
    _stored(spark, target, layout, versions, first, _key_range(group))
    with _session_conf(spark, {RUNTIME_BLOOM_FILTER: "false"}):
        candidates = spark.sql(candidates_sql(layout, first.schema_changes, first.truncate)).localCheckpoint()
        candidates.createOrReplaceTempView(CANDIDATES_VIEW)
        frame = spark.sql(changes_sql(layout, first.rewrites)).localCheckpoint()
    frame.createOrReplaceTempView(CHANGES_VIEW)
    rows = spark.sql(
        f"""
        select 'opened' as what, `_lh_from` as b, count(*) as n from {CHANGES_VIEW}
        where `_lh_action` = 'insert' group by `_lh_from`
        union all
        select 'closed', `_lh_to`, count(*) from {CHANGES_VIEW} where `_lh_to` is not null group by `_lh_to`
        union all
        select 'gone', `_lh_to`, count(*) from {CHANGES_VIEW} where `_lh_gone` group by `_lh_to`
        union all
        select 'closes_stored', 0, count(*) from {CHANGES_VIEW} where `_lh_action` = 'close'
        union all
        select 'clash', min(`_lh_clash`), 1 from {CHANGES_VIEW} having min(`_lh_clash`) is not null
        union all
        select 'interleave', min(`_lh_interleave`), 1 from {CHANGES_VIEW} having min(`_lh_interleave`) is not null
        """
    ).collect()
    counts: dict[str, dict[int, int]] = {}
    for r in rows:
        counts.setdefault(r.what, {})[r.b] = r.n
    return _Changes(
        frame=frame,
        opened=counts.get("opened", {}),
        closed=counts.get("closed", {}),
        gone=counts.get("gone", {}),
        closes_stored=counts.get("closes_stored", {}).get(0, 0) > 0,
        clash=min(counts.get("clash", {}), default=None),
        interleave=min(counts.get("interleave", {}), default=None),
    )


@contextmanager
def _session_conf(spark: SparkSession, settings: dict[str, str]):
    """The Spark session settings for the statements of the block; the previous ones after it."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def _stored(
    spark: SparkSession, target: str, layout: Layout, versions: Versioning, first: Batch, key_range: tuple
) -> None:
    """`__lh_stored`: the table's current rows the group reaches: those of its keys (within the
    range of the first key column, a literal bound, so Delta skips the files of other keys) and,
    for a first batch that truncates or changes the schema, those that rewrite touches."""
    row = cols(layout.row, "t")
    current = _current_rows(target, layout, versions)
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


def _current_rows(target: str, layout: Layout, versions: Versioning) -> str:
    """The history table's rows current in transaction time, as a subquery."""
    if versions.append_only:
        by = cols((*layout.keys, START))
        return (
            f"(select * except (`_lh_rank`, `removal`) from (select *, row_number() over (partition by {by}"
            f" order by `valid_from` desc) as `_lh_rank` from {target}) where `_lh_rank` = 1 and not `removal`)"
        )
    return f"(select * from {target} as c where {versions.is_current('c')})"


def _version_sql(versions: Versioning, txns: list[ledger.Txn]) -> str:
    """A template: the version a group ordinal `{}` stands for (the transaction's id or time)."""
    if versions.version_type == "integer":
        return f"({txns[0].txn_id - 1} + {{}})"
    times = ", ".join(f"timestamp'{t.started_at}'" for t in txns)
    return f"element_at(array({times}), cast({{}} as int))"


def _write(
    spark: SparkSession,
    target: str,
    layout: Layout,
    versions: Versioning,
    version: str,
    changes: _Changes,
    group: list[Batch],
) -> None:
    """One commit: the MERGE that closes stored rows and inserts the new ones, or a plain append
    when no stored row closes (a first build, new keys only) or the table is append-only."""
    row = cols(layout.row)
    frame = CHANGES_VIEW
    if versions.append_only:
        spark.sql(f"""
            insert into {target} ({row}, `valid_from`, `removal`)
            select {row}, {version.format("`_lh_from`")}, false from {frame} where `_lh_action` = 'insert'
            union all
            select {row}, {version.format("`_lh_to`")}, true from {frame} where `_lh_gone`
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
        low, high = _key_range(group)
        condition = condition & F.col(f"{target}.{q(k[0])}").between(F.lit(low), F.lit(high))
    values = {q(c): F.col(f"s.{q(c)}") for c in layout.row}
    values["`valid_from`"] = F.expr(version.format("s.`_lh_from`"))
    values["`valid_to`"] = F.expr(to)
    (
        spark.table(CHANGES_VIEW)
        .where("`_lh_action` in ('close', 'insert')")
        .alias("s")
        .mergeInto(target, condition)
        .whenMatched()
        .update({"`valid_to`": F.expr(version.format("s.`_lh_to`"))})
        .whenNotMatched(F.expr("s.`_lh_action` = 'insert'"))
        .insert(values)
        .merge()
    )


def _key_range(group: list[Batch]) -> tuple[Any, Any]:
    lows = [b.key_range[0] for b in group if b.key_range[0] is not None]
    highs = [b.key_range[1] for b in group if b.key_range[1] is not None]
    return (min(lows), max(highs)) if lows else (None, None)


def _own_commit(spark: SparkSession, target: str, txns: list[ledger.Txn]) -> ledger.Commit:
    """The commit the group just made (the table's latest), checked to be ours."""
    latest = spark.sql(f"describe history {target} limit 1").collect()[0]
    committed = ledger.committed_txns(latest["userMetadata"])
    if not committed or [t.txn_id for t in committed] != [t.txn_id for t in txns]:
        raise ledger.LedgerError(
            f"{target}: the latest commit (Delta version {latest['version']}) is not the one this run just made:"
            " another process writes to this table. Run history models from one dbt invocation at a time."
        )
    return ledger.Commit(int(latest["version"]), latest["timestamp"], committed)


def _clash_message(frame: DataFrame, batch: Batch, layout: Layout) -> str:
    clash = frame.where("`_lh_clash` = 1").select(*[q(k) for k in layout.keys], q(START)).first()
    key = [clash[k] for k in layout.keys] if clash else []
    start = clash[START] if clash else "?"
    return (
        f"Batch {batch.batch_id} of {batch.source_table}: a version of key {key} has _fivetran_start {start}, which"
        " the table already holds, and the batch gives no earliest start for the key that would replace it (spec"
        " rules 6, 7, 9). This batch and the later ones were not applied."
    )
