"""Transactions: what a history table's own Delta commits say was applied, and the project's
transactions table, which is derived from them.

A group of batches is one Delta commit of the history table. Its commit info carries, as
`userMetadata`, the transactions it makes (ids, batches, counts, times). The transactions table
gets the same rows right after the commit. If the run stops in between, the commit is the truth:
the next run reads the history table's commits that the transactions table has not seen
(`DESCRIBE HISTORY`, newest first, down to the last recorded Delta version) and records them
before it allocates a new id. So a batch is applied exactly once and ids stay gap-free, whatever
moment a run was killed at.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType, TimestampType

from lakehistory.errors import LakehistoryError
from lakehistory.history import lock
from lakehistory.history.session import session_conf
from lakehistory.history.transactions import (
    ABANDON,
    COLUMNS,
    LAYOUT,
    OPERATION_SYNC_PREFIX,
    RECORDING_COLUMNS,
    SYNCS_LAYOUT,
    TABLE_COLUMNS,
    TransactionsLayoutError,
    create_if_missing,
    create_sql,
    syncs_relation,
)
from lakehistory.history.uuids import database_id_of_uuid, database_id_sql
from lakehistory.invocation import Invocation
from lakehistory.sql import q
from lakehistory.transaction_parts import PART_FIELDS, PARTS, each_part

COMMIT_KEY = "lakehistory"
COMMIT_FORMAT = 1
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
NEW_TRANSACTIONS_VIEW = "__lh_new_transactions"
# Delta copies a MERGE's source before it reads it twice (to find the files to rewrite, then to
# write them), in case the source changes in between: a Spark job a fixed source does not need.
MERGE_SOURCE_COPY = "spark.databricks.delta.merge.materializeSource"

_TYPES = {"bigint": LongType(), "string": StringType()}
_PART_SCHEMA = ArrayType(StructType([StructField(name, _TYPES[t]) for name, t in PART_FIELDS]))
_ROW_SCHEMA = StructType(
    [
        StructField("txn_id", LongType()),
        StructField("operation", StringType()),
        StructField("source_table", StringType()),
        StructField("history_table", StringType()),
        StructField("batch_id", StringType()),
        StructField("batch_sequence", LongType()),
        StructField("author", StringType()),
        StructField("app_id", StringType()),
        StructField("commit_message", StringType()),
        StructField("started_at", StringType()),
        StructField("committed_at", TimestampType()),
        StructField("rows_in", LongType()),
        StructField("versions_opened", LongType()),
        StructField("versions_closed", LongType()),
        StructField("rows_overlap_deleted", LongType()),
        StructField("rows_purged", LongType()),
        StructField("delta_version", LongType()),
        StructField("sync_id", StringType()),
        StructField("commit_json", StringType()),
        StructField("schema_changes", StringType()),
        StructField(PARTS, _PART_SCHEMA),
    ]
)


class LedgerError(LakehistoryError, RuntimeError):
    """The history table and the transactions table disagree in a way no rerun can repair."""


class TransactionTakenError(LakehistoryError, RuntimeError):
    """A transaction id this run took is recorded by another writer: this run lost the writer lock."""


def insert_transactions(
    spark: SparkSession, transactions: str, rows: DataFrame, first_id: int, recorded: Sequence[tuple[Any, ...]] = ()
) -> None:
    """Record the transactions `rows` (the columns a writer gives, transactions.COLUMNS, in order,
    then perhaps `parts`; ids from `first_id` on) in one commit, only if none of their ids is
    recorded yet, but by another table of the same sync: the fence behind the writer lock. An id
    already there fails the statement, so nothing of it is written; a writer that records at the
    same moment makes Delta refuse one of the two commits, since each reads the part of the table
    it could clash with (ids from `first_id` on, which also lets Delta skip every older file). The
    same commit
    gives the rows their index and database id, and marks the transactions these rows make
    visible (_visible_after). `recorded`: the rows as _ROW_SCHEMA tuples, to keep what this
    process knows of the table (_Known) up to date; without them, it reads the table again."""
    known = _known.pop(transactions, None)
    hold = lock.active_hold()
    # under the same hold as when this process last recorded, no other process wrote the table
    seen = known.visibility if known is not None and hold is not None and known.hold == hold else None
    if len(rows.columns) > len(COLUMNS):  # the ledger's rows of a publish: its parts last
        given = rows.toDF(*COLUMNS, PARTS)
    else:
        given = rows.toDF(*COLUMNS).withColumn(PARTS, F.lit(None).cast(_PART_SCHEMA))
    new = given.collect()  # a row per table of the transactions: in memory already, or nearly
    last_index, visible, after = _visible_after(spark, transactions, new, seen)
    fields = [StructField(f.name, f.dataType) for f in given.schema.fields]
    schema = StructType(
        [
            *fields,
            StructField("row_index", LongType()),
            StructField("database_id", LongType()),
            StructField("visible_at", TimestampType()),
            StructField("_lh_new", BooleanType()),
        ]
    )
    order = sorted(range(len(new)), key=lambda i: (new[i].txn_id, new[i].history_table, new[i].operation))
    index = {i: last_index + n for n, i in enumerate(order, start=1)}
    source = [
        (*r, index[i], database_id_of_uuid(r.txn_uuid), visible.get(r.txn_id), True) for i, r in enumerate(new)
    ] + [
        (*(txn_id if f.name == "txn_id" else None for f in fields), None, None, at, False)
        for txn_id, at in visible.items()
    ]
    columns = ", ".join(q(c) for c in TABLE_COLUMNS)
    values = ", ".join(f"s.{q(c)}" for c in TABLE_COLUMNS)
    taken = "raise_error(concat('lakehistory: transaction ', cast(s.`txn_id` as string), ' is already recorded'))"
    other_table_of_sync = "coalesce(s.`sync_id` = t.`sync_id` and s.`history_table` != t.`history_table`, false)"
    try:
        with session_conf(spark, {MERGE_SOURCE_COPY: "none"}):  # the rows are data in memory
            spark.sql(
                f"""
                merge into {transactions} as t
                using {{source}} as s
                on t.`txn_id` = s.`txn_id` and t.`txn_id` >= {int(first_id)}
                    and (s.`_lh_new` and not ({other_table_of_sync}) or not s.`_lh_new` and t.`visible_at` is null)
                when matched and s.`_lh_new` then update set t.`operation` = {taken}
                when matched then update set t.`visible_at` = s.`visible_at`
                when not matched and s.`_lh_new` then insert ({columns}) values ({values})
                """,
                source=spark.createDataFrame(source, schema),
            )
    except Exception as exc:
        text = str(exc)
        if "is already recorded" not in text and "concurrent" not in text.lower():
            raise
        raise TransactionTakenError(
            f"Another writer recorded transactions in {transactions} under ids this run took: this run no longer"
            " held the writer lock (it was paused or cut off past its lease). Nothing of its transaction was"
            " recorded, and the run stops. Run again: the next run records what this one committed, or refuses"
            " if another writer gave those ids to other batches."
        ) from None
    if known is not None and recorded:
        _known[transactions] = replace(known.after(recorded), visibility=after if hold == known.hold else None)


@dataclass(frozen=True)
class _Waiting:
    """A row of the transactions table not visible yet, as visibility needs it."""

    txn_id: int
    operation: str | None
    source_table: str | None
    history_table: str | None
    committed_at: Any


@dataclass(frozen=True)
class _Visibility:
    """What _visible_after reads of the transactions table and its syncs table: the last row
    index, the last visible transaction and when it became visible, the rows not visible yet
    after it, and the syncs reserved after it (id: tables). Kept by this process with what it
    knows of the table (_Known) while its hold of the writer lock lasts."""

    last_index: int
    last_visible: int
    since: Any
    waiting: tuple[_Waiting, ...]
    reserved: dict[int, frozenset[str]]

    def recorded(self, rows: Sequence[Row], visible: dict[int, Any]) -> _Visibility:
        """After `rows` were written, `visible` the transactions they made visible."""
        last_visible = max(visible, default=self.last_visible)
        since = visible[last_visible] if visible else self.since
        waiting = (*self.waiting, *(_waiting(r) for r in rows))
        return _Visibility(
            self.last_index + len(rows),
            last_visible,
            since,
            tuple(w for w in waiting if w.txn_id > last_visible),
            {txn: tables for txn, tables in self.reserved.items() if txn > last_visible},
        )

    def reserving(self, reserved: Mapping[int, Sequence[str]]) -> _Visibility:
        more = {txn: frozenset(tables) for txn, tables in reserved.items() if txn > self.last_visible}
        return replace(self, reserved={**self.reserved, **more})


def _waiting(row: Any) -> _Waiting:
    return _Waiting(int(row.txn_id), row.operation, row.source_table, row.history_table, row.committed_at)


def _read_visibility(spark: SparkSession, transactions: str) -> _Visibility:
    """Two small reads: one aggregate of the table (its last index and visible transaction, and
    the rows not visible yet), and the syncs reserved after that transaction."""
    last = spark.sql(
        "select coalesce(max(`row_index`), 0) as `last_index`,"
        " coalesce(max(case when `visible_at` is not null then `txn_id` end), 0) as `last_visible`,"
        " max(`visible_at`) as `since`,"
        " collect_list(case when `visible_at` is null then struct(`txn_id`, `operation`, `source_table`,"
        f" `history_table`, `committed_at`) end) as `waiting` from {transactions}"
    ).collect()[0]
    after = int(last.last_visible)
    reserved = {
        int(r.txn_id): frozenset(r.tables)
        for r in spark.table(syncs_relation(transactions)).where(F.col("txn_id") > F.lit(after)).collect()
    }
    # rows another path wrote without a visibility
    waiting = tuple(_waiting(r) for r in last.waiting if r.txn_id > after)
    return _Visibility(int(last.last_index), after, last.since, waiting, reserved)


def _visible_after(
    spark: SparkSession, transactions: str, new: Sequence[Row], seen: _Visibility | None = None
) -> tuple[int, dict[int, Any], _Visibility]:
    """The table's last row index, when each transaction the `new` rows make visible (theirs,
    or one recorded before that waited for them) became visible, and the table's visibility once
    they are written. `seen`: the visibility as this process left it, when no other wrote since.

    A transaction is visible once it is done (every table of its sync recorded it, or the sync
    was given up; a transaction of one table, when recorded) and every transaction before it is:
    the consistent cut of lakehistory.version_at_sql, so it became visible at the latest time any
    of them was done."""
    state = seen or _read_visibility(spark, transactions)
    after = state.last_visible
    done_at: dict[int, Any] = {}
    tables: dict[int, set[str]] = {}
    abandoned: dict[int, Any] = {}
    rows: list[Any] = [*state.waiting, *(r for r in new if r.txn_id > after)]
    for r in rows:
        txn = int(r.txn_id)
        done_at[txn] = max(done_at.get(txn, r.committed_at), r.committed_at)
        tables.setdefault(txn, set()).update(t for t in (r.source_table, r.history_table) if t)
        if r.operation == ABANDON:
            abandoned[txn] = min(abandoned.get(txn, r.committed_at), r.committed_at)
    visible: dict[int, Any] = {}
    since = state.since
    for txn in sorted(set(done_at) | set(state.reserved)):
        if txn in abandoned:
            done = abandoned[txn]
        elif txn in done_at and state.reserved.get(txn, frozenset()) <= tables[txn]:
            done = done_at[txn]
        else:
            break  # it and every transaction after it wait
        since = done if since is None else max(since, done)
        visible[txn] = since
    return state.last_index, visible, state.recorded(new, visible)


def backfill_recording_columns(spark: SparkSession, transactions: str) -> None:
    """Give the rows of a transactions table made before the recording columns existed their row
    index (in id order), database id and visibility, as insert_transactions would have."""
    order = "`txn_id`, `committed_at`, `history_table`, `operation`, `batch_id`"
    same_row = " and ".join(f"t.{q(c)} <=> s.{q(c)}" for c in ("txn_id", "history_table", "operation", "batch_id"))
    spark.sql(f"""
        merge into {transactions} as t
        using (
            select `txn_id`, `history_table`, `operation`, `batch_id`,
                row_number() over (order by {order}) as `row_index`,
                {database_id_sql("`txn_uuid`")} as `database_id`
            from {transactions}
        ) as s
        on {same_row}
        when matched then update set t.`row_index` = s.`row_index`, t.`database_id` = s.`database_id`
    """)
    nothing = spark.table(transactions).select(*COLUMNS).where(F.lit(False))
    insert_transactions(spark, transactions, nothing, 0)


@dataclass
class Ensured:
    """An invocation's part (invocation.py): the transactions tables it checked."""

    relations: set[str] = field(default_factory=set)


def ensure_transactions_table(spark: SparkSession, relation: str, invocation: Invocation | None = None) -> None:
    """For `lakehistory.ensure_transactions_table`: create the table and its syncs
    table when missing; give a table of an earlier layout the optional columns it lacks; refuse
    one that lacks a required column. Every node of a dbt invocation asks; the first one's answer
    holds for the others (`invocation`)."""
    ensured = invocation.part(Ensured).relations if invocation is not None and invocation.kept else set()
    if relation in ensured:
        return
    for table, layout in ((relation, LAYOUT), (syncs_relation(relation), SYNCS_LAYOUT)):
        create_if_missing(spark, table, create_sql(table, layout))
        stored = set(spark.table(table).columns)
        missing = [f.name for f in layout if f.required and f.name not in stored]
        if missing:
            raise TransactionsLayoutError(
                f"{table} was made by an earlier version of lakehistory (it lacks {', '.join(missing)})."
                " Rebuild from the landed batches: drop it, its syncs table and the history tables (for the"
                " demo: make clean), then run dbt build."
            )
        optional = [f for f in layout if not f.required and f.name not in stored]
        if optional:  # nothing in the rows already there says otherwise: NULL is what they had
            spark.sql(f"alter table {table} add columns ({', '.join(f.sql() for f in optional)})")
        if any(f.name in RECORDING_COLUMNS for f in optional):  # but the recording's columns follow from them
            backfill_recording_columns(spark, table)
    ensured.add(relation)


@dataclass(frozen=True)
class Txn:
    """One transaction, as its history table's commit records it: an applied batch, or a revert
    (operations/revert.py), which has no batch."""

    txn_id: int
    batch_id: str | None
    sequence: int | None
    source_table: str | None
    author: str | None
    app_id: str | None
    commit_message: str | None
    started_at: str  # 'yyyy-MM-dd HH:mm:ss.SSS', UTC
    rows_in: int
    versions_opened: int
    versions_closed: int
    rows_overlap_deleted: int
    operation: str = "batch"  # commits made before reverts existed carry no operation
    sync_id: str | None = None  # the sync whose id it shares with the sync's other tables
    commit_json: str | None = None  # the manifest's commit_json, as JSON text
    # a batch's schema changes (landing.manifests.recorded_schema_changes); None: a commit made
    # before they were recorded, or not a batch
    schema_changes: str | None = None
    rows_purged: int = 0  # a cleanup's (statements.run_transaction)
    # a publish's row of a table the branch changed in several transactions: each of them, as
    # PART_FIELDS name a part's fields (the transactions table's `parts`)
    parts: list[dict[str, Any]] | None = None

    def batches(self) -> list[tuple[str | None, str | None]]:
        """The (source table, batch id) of each batch or edit the transaction applied."""
        if not self.parts:
            return [(self.source_table, self.batch_id)]
        return [(p["source_table"], p["batch_id"]) for p in self.parts]


def commit_metadata(txns: Sequence[Txn]) -> str:
    return json.dumps({COMMIT_KEY: {"format": COMMIT_FORMAT, "transactions": [asdict(t) for t in txns]}})


def committed_txns(user_metadata: str | None) -> list[Txn] | None:
    """The transactions a commit made, or None for a commit the history merge did not make."""
    if not user_metadata:
        return None
    try:
        body = json.loads(user_metadata)[COMMIT_KEY]
    except (ValueError, KeyError, TypeError):
        return None
    return [Txn(**t) for t in body["transactions"]]


@dataclass(frozen=True)
class Commit:
    version: int
    timestamp: dt.datetime
    txns: list[Txn]


def transaction_times(last_started: dt.datetime | None, count: int, now: dt.datetime | None = None) -> list[str]:
    """Start times of `count` new transactions: now, but always after the previous transaction's,
    1 ms apart, so started_at orders transactions too (and timestamp versions stay distinct)."""
    now = (now or dt.datetime.now(dt.UTC)).replace(tzinfo=None)  # naive UTC, like `last_started`
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)
    first = now if last_started is None else max(now, last_started.replace(tzinfo=None) + dt.timedelta(milliseconds=1))
    return [(first + dt.timedelta(milliseconds=i)).isoformat(sep=" ", timespec="milliseconds") for i in range(count)]


def unrecorded_commits(spark: SparkSession, history: str, state: Recorded, latest: Any = None) -> list[Commit]:
    """The history table's commits that made transactions the transactions table lacks, oldest
    first: those from its last recorded Delta version on (that one too, in case rows of it were
    lost), with only their unrecorded transactions. `latest`: the table's last commit (a row of
    its `describe history`), when the caller knows it is still the last."""
    latest = [latest] if latest is not None else spark.sql(f"describe history {history} limit 1").collect()
    if not latest:
        return []
    since = state.delta_version if state.delta_version is not None else 0
    span = latest[0]["version"] - since + 1
    rows = latest if span <= 1 else spark.sql(f"describe history {history} limit {int(span)}").collect()
    commits = []
    for row in rows:
        txns = [t for t in committed_txns(row["userMetadata"]) or [] if t.txn_id > state.history_last_id]
        if txns and row["version"] >= since:
            commits.append(Commit(int(row["version"]), row["timestamp"], txns))
    return sorted(commits, key=lambda c: c.version)


def record(spark: SparkSession, transactions: str, commits: Iterable[tuple[str, Commit]], uuid_sql: str) -> int:
    """Insert the transactions of `commits` (history table, commit) into the transactions table,
    in one statement. `uuid_sql` is the SQL expression of a transaction's uuid over `txn_id` and
    `started_at`."""
    rows = [
        (
            t.txn_id,
            t.operation,
            t.source_table,
            history,
            t.batch_id,
            t.sequence,
            t.author,
            t.app_id,
            t.commit_message,
            t.started_at,
            c.timestamp,
            t.rows_in,
            t.versions_opened,
            t.versions_closed,
            t.rows_overlap_deleted,
            t.rows_purged,
            c.version,
            t.sync_id,
            t.commit_json,
            t.schema_changes,
            t.parts,
        )
        for history, c in commits
        for t in c.txns
    ]
    if not rows:
        return 0
    frame = spark.createDataFrame(rows, _ROW_SCHEMA)
    frame.withColumn("started_at", frame["started_at"].cast("timestamp")).createOrReplaceTempView(NEW_TRANSACTIONS_VIEW)
    new = spark.sql(f"""
        select
            txn_id,
            {uuid_sql},
            operation,
            source_table,
            history_table,
            batch_id,
            batch_sequence,
            author,
            app_id,
            commit_message,
            started_at,
            committed_at,
            rows_in,
            versions_opened,
            versions_closed,
            rows_overlap_deleted,
            rows_purged,
            delta_version,
            sync_id,
            commit_json,
            schema_changes,
            {PARTS}
        from `{NEW_TRANSACTIONS_VIEW}`
    """)
    insert_transactions(spark, transactions, new, min(r[0] for r in rows), rows)
    spark.catalog.dropTempView(NEW_TRANSACTIONS_VIEW)
    return len(rows)


@dataclass(frozen=True)
class Recorded:
    """What the transactions table holds: the last id and start time (all tables, and the ids
    reserved for syncs), and for one history table its last id and recorded Delta version, and
    the last id a revert or undo reserved for it (0: none). One above its last id is a revert
    stopped before it reached the table: no other transaction may come to the table first.
    `last_sequence`: the last batch sequence the table applied (None: none)."""

    last_id: int
    last_started: dt.datetime | None
    history_last_id: int
    delta_version: int | None
    operation_reserved: int = 0
    last_sequence: int | None = None


def recorded(spark: SparkSession, transactions: str, history: str) -> Recorded:
    return recorded_for(spark, transactions, [history])[history]


def last_of(*sequences: int | None) -> int | None:
    """The largest of the batch sequences that are given (None for none)."""
    return max((s for s in sequences if s is not None), default=None)


_NOTHING_YET = (0, None, 0, None)  # a history table the transactions table has no row of


@dataclass(frozen=True)
class _Known:
    """What the transactions table held when this process last read it under the writer lock
    (`hold`, lock.active_hold), with what it recorded since: while the hold lasts, no other
    process writes the table, so this is what it holds, without a read of it (and of Delta's
    state of it, which every record changes). It knows every history table: one it has no entry
    for has nothing recorded."""

    hold: tuple[str, int]
    last_id: int
    last_started: dt.datetime | None
    # history table: its last id, Delta version, last id a revert or undo reserved for it, and
    # last batch sequence
    tables: dict[str, tuple[int, int | None, int, int | None]]
    visibility: _Visibility | None = None  # once this process recorded in the hold

    def of(self, history: str) -> Recorded:
        return Recorded(self.last_id, self.last_started, *self.tables.get(history, _NOTHING_YET))

    def after(self, rows: Sequence[tuple[Any, ...]]) -> _Known:
        tables = dict(self.tables)
        for row in rows:  # _ROW_SCHEMA tuples
            txn_id, history, version = row[0], row[3], row[16]
            sequence = row[5] if row[1] == "batch" else None
            last_id, last_version, operation, last_sequence = tables.get(history, _NOTHING_YET)
            last_version = version if last_version is None else max(last_version, version)
            if sequence is not None:
                last_sequence = sequence if last_sequence is None else max(last_sequence, sequence)
            tables[history] = (max(last_id, txn_id), last_version, operation, last_sequence)
        started = max(dt.datetime.fromisoformat(r[9]) for r in rows)
        last_started = started if self.last_started is None else max(self.last_started, started)
        return _Known(self.hold, max(self.last_id, *(r[0] for r in rows)), last_started, tables, self.visibility)


_known: dict[str, _Known] = {}  # per transactions table


def note_reserved(
    transactions: str,
    last_id: int,
    last_started: dt.datetime,
    reserved: Mapping[int, Sequence[str]],
    operation_of: Sequence[str] = (),
) -> None:
    """Count ids this process just reserved (`reserved`: each id's tables) in what it knows; with
    `operation_of`, the last one is a revert's or undo's of those history tables."""
    known = _known.get(transactions)
    if known is not None:
        started = last_started if known.last_started is None else max(known.last_started, last_started)
        tables = dict(known.tables)
        for history in operation_of:
            last, version, _, sequence = tables.get(history, _NOTHING_YET)
            tables[history] = (last, version, last_id, sequence)
        visibility = known.visibility.reserving(reserved) if known.visibility is not None else None
        _known[transactions] = _Known(known.hold, max(known.last_id, last_id), started, tables, visibility)


def forget(transactions: str) -> None:
    """Read the transactions table again next time (a new dbt invocation: what it holds may have
    been changed by hand since)."""
    _known.pop(transactions, None)


def known_state(transactions: str, hold: tuple[str, int], history: str) -> Recorded | None:
    """What the transactions table holds for `history`, as this process knows it without a read,
    when what it knows was read, and changed since, under `hold` (lock.active_hold's form)."""
    known = _known.get(transactions)
    return known.of(history) if known is not None and known.hold == hold else None


def recorded_for(spark: SparkSession, transactions: str, histories: Sequence[str]) -> dict[str, Recorded]:
    """What the transactions table holds for each of `histories`. One scan answers for every
    history table at once (a group by table, a row each), so under the writer lock, what this
    process knows already (_Known) answers every later call of the hold without a scan."""
    hold = lock.active_hold()
    known = _known.get(transactions)
    if hold is None or known is None or known.hold != hold:
        known = _read_known(spark, transactions, hold or ("", 0))
        if hold is not None:
            _known[transactions] = known
    return {history: known.of(history) for history in histories}


def _read_known(spark: SparkSession, transactions: str, hold: tuple[str, int]) -> _Known:
    none = F.lit(None)
    recorded = each_part(spark.table(transactions)).select(
        F.col("history_table").alias("table"),
        "txn_id",
        "started_at",
        F.col("txn_id").alias("table_txn_id"),
        "delta_version",
        F.when(F.col("operation") == "batch", F.col("batch_sequence")).alias("batch_sequence"),
        none.cast("bigint").alias("operation_txn_id"),
    )
    # The syncs' reserved ids, which no table may have recorded yet, count in the last id and
    # start; a revert's or undo's also in the last id it reserved for each of its tables.
    operation = F.col("sync_id").startswith(OPERATION_SYNC_PREFIX)
    reserved = spark.table(syncs_relation(transactions)).select(
        F.explode_outer(F.when(operation, F.col("tables"))).alias("table"),
        "txn_id",
        "started_at",
        none.cast("bigint").alias("table_txn_id"),
        none.cast("bigint").alias("delta_version"),
        none.cast("bigint").alias("batch_sequence"),
        F.when(operation, F.col("txn_id")).alias("operation_txn_id"),
    )
    rows = (
        recorded.unionByName(reserved)
        .groupBy("table")
        .agg(
            F.max("txn_id").alias("last_id"),
            # as text in the session's time zone (UTC), not converted to the Python process's
            F.date_format(F.max("started_at"), "yyyy-MM-dd HH:mm:ss.SSS").alias("last_started"),
            F.coalesce(F.max("table_txn_id"), F.lit(0)).alias("table_last_id"),
            F.max("delta_version").alias("delta_version"),
            F.coalesce(F.max("operation_txn_id"), F.lit(0)).alias("operation_reserved"),
            F.max("batch_sequence").alias("last_sequence"),
        )
        .collect()  # a row per history table: grows with the project's tables, not its data
    )
    started = [r["last_started"] for r in rows if r["last_started"]]
    return _Known(
        hold,
        max((int(r["last_id"]) for r in rows), default=0),
        dt.datetime.fromisoformat(max(started)) if started else None,
        {
            r["table"]: (int(r["table_last_id"]), r["delta_version"], int(r["operation_reserved"]), r["last_sequence"])
            for r in rows
            if r["table"] is not None
        },
    )


def recover(
    spark: SparkSession,
    transactions: str,
    history: str,
    uuid_sql: str,
    state: Recorded | None = None,
    latest: Any = None,
) -> tuple[Recorded, list[Txn]]:
    """Record what the history table committed and the transactions table lacks (a run stopped
    between the two). `state`: what the transactions table holds for it, when the caller has just
    read that; `latest`: the table's last commit, when the caller knows it (unrecorded_commits).
    Returns what the transactions table holds afterwards, and the transactions it just recorded."""
    state = state or recorded(spark, transactions, history)
    commits = unrecorded_commits(spark, history, state, latest)
    if not commits:
        return state, []
    txns = [t for c in commits for t in c.txns]
    # A sync's id was reserved before any table applied it (syncs.py): only an id of its own is new.
    first = min((t.txn_id for t in txns if t.sync_id is None), default=None)
    if first is not None and first <= state.last_id:
        raise LedgerError(
            f"{history} committed transaction {first} (Delta version {commits[0].version}), but the transactions"
            f" table already gives id {first} to another transaction: two runs applied batches to this lakehouse"
            " at the same time. Run history models from one dbt invocation at a time."
        )
    record(spark, transactions, [(history, c) for c in commits], uuid_sql)
    last = max(txns, key=lambda t: t.txn_id)
    started = dt.datetime.fromisoformat(last.started_at)
    after = Recorded(
        max(state.last_id, last.txn_id),
        started if state.last_started is None else max(state.last_started, started),
        last.txn_id,
        commits[-1].version,
        state.operation_reserved,
        last_of(state.last_sequence, *(t.sequence for t in txns if t.operation == "batch")),
    )
    return after, txns
