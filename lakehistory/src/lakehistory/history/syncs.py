"""A sync is one transaction: the ids the tables of a sync share, reserved before any applies it.

A sync's tables are applied by different models, in whatever order dbt's threads run them, in one
run or in several. The first of them to apply it reserves the sync's id under the writer lock, in
the syncs table beside the transactions table (its layout: transactions.py), together with the
ids of every other sync pending in the run, in sync order. So ids follow the syncs' order,
whichever table comes first, and stay gap-free: an id is taken once, by a reservation or by a
batch of its own, never twice. Every table of the sync then records its batch under that id,
with the sync's start time (and so its uuid) and its author and app.

A reservation is its own commit, before any history table's: a run stopped after it leaves the
id reserved, and the next run applies the sync under it. The sync becomes visible to readers
once each of its tables has recorded it (`lakehistory.visible_txn_sql`, macros/time_travel/as_of.sql).

A revert or undo (operations/revert.py) reserves its one transaction for all its tables here too, with what
was asked. Stopped before each table recorded it, it is completed by asking it again; until
then its tables take no other transaction (plan.py refuses them, naming the command).

A sync some table will never apply (its batch never lands) is given up (operations/abandon.py):
a row of operation 'abandon' under the sync's id makes it visible with the tables that have it,
and a batch of it landing later is refused (`Reserved.abandoned`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock
from lakehistory.history.session import session_conf
from lakehistory.history.transactions import ABANDON, OPERATION_SYNC_PREFIX, SYNCS_COLUMNS, syncs_relation
from lakehistory.landing.syncs import SyncOf
from lakehistory.sql import lit, q


@dataclass(frozen=True)
class Reserved:
    """A sync's transaction: its id and start ('yyyy-MM-dd HH:mm:ss.SSS', UTC)."""

    txn_id: int
    started_at: str
    sync: SyncOf
    # when the sync was given up (lakehistory.abandon_sync): by whom and when, as the log says
    abandoned: str | None = None

    def abandoned_message(self, what: str) -> str:
        """Why `what` (a batch or an extract of the sync, as the landing names it) is not applied."""
        return (
            f"{what} belongs to sync {self.sync.id} (transaction {self.txn_id}), which was given up"
            f" {self.abandoned} (dbt run-operation lakehistory.abandon_sync): the tables that had applied it keep"
            " it, and no other table may apply it now. Land these changes again in a new sync (a new sync id) and"
            " remove this one from the landing. Nothing of this run was applied to this table."
        )


# Per syncs table: the reservations this process read or made during one hold of the writer lock
# (lock.active_hold): while it lasts, no other process reserves.
_seen: dict[str, tuple[tuple[str, int], dict[str, Reserved]]] = {}


def reserve(
    spark: SparkSession, transactions: str, wanted: Iterable[SyncOf], state: ledger.Recorded
) -> tuple[dict[str, Reserved], ledger.Recorded]:
    """The transactions of the syncs `wanted`, reserving those not reserved yet: the next ids after
    `state.last_id`, in sync order (sequence, then id), in one commit. Under the writer lock.
    Returns them by sync id, and `state` with the ids and start times taken."""
    table = syncs_relation(transactions)
    by_id = {sync.id: sync for sync in wanted}
    hold = lock.active_hold()
    seen = _seen[table][1] if hold is not None and table in _seen and _seen[table][0] == hold else {}
    unseen = sorted(set(by_id) - set(seen))
    if unseen:
        seen = {**seen, **_read(spark, transactions, unseen)}
    for sync_id, found in seen.items():
        if sync_id in by_id and found.sync != by_id[sync_id]:
            raise HistoryError(_contradiction(by_id[sync_id], found))
    new = sorted((s for sync_id, s in by_id.items() if sync_id not in seen), key=lambda s: (s.sequence, s.id))
    if new:
        times = ledger.transaction_times(state.last_started, len(new))
        made = {s.id: Reserved(state.last_id + i, times[i - 1], s) for i, s in enumerate(new, start=1)}
        _insert(spark, table, list(made.values()))
        seen = {**seen, **made}
        last_started = dt.datetime.fromisoformat(times[-1])
        state = replace(state, last_id=state.last_id + len(new), last_started=last_started)
        tables_of = {r.txn_id: r.sync.tables for r in made.values()}
        ledger.note_reserved(transactions, state.last_id, last_started, tables_of)
    if hold is not None:
        _seen[table] = (hold, seen)
    return {sync_id: seen[sync_id] for sync_id in by_id}, state


def _read(spark: SparkSession, transactions: str, sync_ids: list[str]) -> dict[str, Reserved]:
    """The reservations of `sync_ids`, with whether each was given up: one read of the syncs table
    and of the transactions table's abandon rows (a few, found by the statistics of a column)."""
    # as text in the session's time zone (UTC), not converted to the Python process's
    text = "yyyy-MM-dd HH:mm:ss.SSS"
    given_up = (
        spark.table(transactions)
        .where((F.col("operation") == F.lit(ABANDON)) & F.col("sync_id").isin(*sync_ids))
        .select(
            "sync_id",
            F.concat(
                F.lit("by "), F.coalesce("author", F.lit("?")), F.lit(" at "), F.date_format("committed_at", text)
            ).alias("abandoned"),
        )
    )
    rows = (
        spark.table(syncs_relation(transactions))
        .where(F.col("sync_id").isin(*sync_ids))
        .join(given_up, "sync_id", "left")
        .select(
            "txn_id",
            "sync_id",
            "sync_sequence",
            "tables",
            "author",
            "app_id",
            F.date_format("started_at", text).alias("started_at"),
            "abandoned",
        )
        .collect()  # a row per sync asked for
    )
    return {
        r.sync_id: Reserved(
            int(r.txn_id),
            r.started_at,
            SyncOf(r.sync_id, int(r.sync_sequence), tuple(r.tables), r.author, r.app_id),
            r.abandoned,
        )
        for r in rows
    }


def given_up(spark: SparkSession, transactions: str | None, sync_id: str) -> Reserved | None:
    """The sync's reservation when it was given up (lakehistory.abandon_sync), else None."""
    if transactions is None or not spark.catalog.tableExists(syncs_relation(transactions).replace("`", "")):
        return None
    found = _read(spark, transactions, [sync_id]).get(sync_id)
    return found if found is not None and found.abandoned else None


def _insert(spark: SparkSession, table: str, reserved: list[Reserved], request: str | None = None) -> None:
    """Record the reservations in one commit, only if neither their ids nor their syncs are there:
    the fence behind the writer lock, as for the transactions table (ledger.insert_transactions).
    `request`: a revert's (see Operation)."""
    rows = spark.createDataFrame(
        [
            (
                r.txn_id,
                r.sync.id,
                r.sync.sequence,
                list(r.sync.tables),
                r.sync.author,
                r.sync.app_id,
                r.started_at,
                request,
            )
            for r in reserved
        ],
        "txn_id bigint, sync_id string, sync_sequence bigint, tables array<string>, author string, app_id string,"
        " started_at string, request string",
    ).selectExpr("*", "current_timestamp() as reserved_at")
    rows = rows.withColumn("started_at", F.col("started_at").cast("timestamp")).select(*SYNCS_COLUMNS)
    taken = (
        "raise_error(concat('lakehistory: sync ', s.`sync_id`, ' or transaction ', cast(s.`txn_id` as string),"
        " ' is already reserved'))"
    )
    lock.check_held()
    try:
        with session_conf(spark, {ledger.MERGE_SOURCE_COPY: "none"}):  # the rows are data in memory
            spark.sql(
                f"""
                merge into {table} as t
                using {{rows}} as s
                on t.`txn_id` = s.`txn_id` or t.`sync_id` = s.`sync_id`
                when matched then update set t.`author` = {taken}
                when not matched then insert ({", ".join(q(c) for c in SYNCS_COLUMNS)})
                    values ({", ".join(f"s.{q(c)}" for c in SYNCS_COLUMNS)})
                """,
                rows=rows,
            )
    except Exception as exc:
        if "is already reserved" not in str(exc) and "concurrent" not in str(exc).lower():
            raise
        raise ledger.TransactionTakenError(
            f"Another writer reserved transactions in {table} that this run reserved: this run no longer held the"
            " writer lock (it was paused or cut off past its lease). Nothing of its reservation was recorded, and"
            " the run stops. Run again."
        ) from None


def _contradiction(sync: SyncOf, found: Reserved) -> str:
    return (
        f"sync {sync.id} is reserved as transaction {found.txn_id} with tables {list(found.sync.tables)}, sequence"
        f" {found.sync.sequence}, author {found.sync.author!r} and app {found.sync.app_id!r}, but a pending batch"
        f" of it says {list(sync.tables)}, {sync.sequence}, {sync.author!r} and {sync.app_id!r}. Every batch of a"
        " sync must say the same of it: land the batch again with the sync as the others give it."
    )


# --- reverts and undos -------------------------------------------------------------------------------


# A key of an operation's request that is the engine's, not the macro's argument (a branch's id).
PRIVATE = "_"


@dataclass(frozen=True)
class Operation:
    """A revert's or undo's reservation (operations/revert.py): its transaction, what was asked (JSON: the
    operation and its dbt arguments) and the history tables that have recorded it."""

    reserved: Reserved
    request: str
    applied: frozenset[str]

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(t for t in self.reserved.sync.tables if t not in self.applied)

    def stopped_message(self) -> str:
        asked = {k: v for k, v in json.loads(self.request).items() if not k.startswith(PRIVATE)}
        operation = asked.pop("operation")
        return (
            f"the {operation} recorded as transaction {self.reserved.txn_id} was stopped before"
            f" {', '.join(self.waiting)} recorded it: it is not visible to readers of the consistent cut, and no"
            " other transaction may come to those tables before it. Run it again to complete it:"
            f" dbt run-operation lakehistory.{operation} --args '{json.dumps(asked)}'; or, when it cannot complete,"
            f" give it up: {self.give_up_command()}"
        )

    def give_up_command(self) -> str:
        """The command that gives the operation up when it cannot complete (operations/abandon.py)."""
        return f"dbt run-operation lakehistory.abandon_sync --args '{json.dumps({'sync_id': self.reserved.sync.id})}'"


def reserve_operation(
    spark: SparkSession,
    transactions: str,
    operation: str,
    tables: Sequence[str],
    author: str | None,
    request: str,
    state: ledger.Recorded,
) -> tuple[Operation, ledger.Recorded]:
    """Reserve the next id for a revert or undo (`operation`) of the history tables `tables`,
    asked as `request`. Under the writer lock. Returns it, and `state` with the id taken."""
    txn_id = state.last_id + 1
    started = ledger.transaction_times(state.last_started, 1)[0]
    sync = SyncOf(
        f"{OPERATION_SYNC_PREFIX}{operation}:{txn_id}",
        txn_id,
        tuple(sorted(tables)),
        author,
        f"lakehistory.{operation}",
    )
    reserved = Reserved(txn_id, started, sync)
    _insert(spark, syncs_relation(transactions), [reserved], request)
    last_started = dt.datetime.fromisoformat(started)
    ledger.note_reserved(transactions, txn_id, last_started, {txn_id: sync.tables}, operation_of=sync.tables)
    return Operation(reserved, request, frozenset()), replace(
        state, last_id=txn_id, last_started=last_started, operation_reserved=txn_id
    )


def operations(spark: SparkSession, transactions: str, request: str | None = None) -> list[Operation]:
    """The reverts and undos some table has not recorded yet, and those asked as `request`, in id
    order: a few rows, however long the history."""
    mine = F.col("sync_id").startswith(OPERATION_SYNC_PREFIX)
    applied = (
        spark.table(transactions).where(mine).groupBy("sync_id").agg(F.collect_set("history_table").alias("applied"))
    )
    rows = (
        spark.table(syncs_relation(transactions))
        .where(mine)
        .join(applied, "sync_id", "left")
        .withColumn("applied", F.coalesce("applied", F.array().cast("array<string>")))
        .where((F.size(F.array_except("tables", "applied")) > 0) | (F.col("request") == F.lit(request)))
        .select(
            "txn_id",
            "sync_id",
            "tables",
            "author",
            "app_id",
            "request",
            "applied",
            F.date_format("started_at", "yyyy-MM-dd HH:mm:ss.SSS").alias("started_at"),
        )
        .orderBy("txn_id")
        .collect()  # the reverts asked as `request`, and at most one stopped
    )
    return [
        Operation(
            Reserved(
                int(r.txn_id), r.started_at, SyncOf(r.sync_id, int(r.txn_id), tuple(r.tables), r.author, r.app_id)
            ),
            r.request,
            frozenset(r.applied),
        )
        for r in rows
    ]


def stopped_operation_message(spark: SparkSession, transactions: str, txn_id: int) -> str:
    """Why a table a stopped revert or undo (transaction `txn_id`) holds takes no transaction."""
    stopped = [o for o in operations(spark, transactions) if o.reserved.txn_id == txn_id]
    return stopped[0].stopped_message() if stopped else f"revert transaction {txn_id} is not complete"


def owed(spark: SparkSession, transactions: str, history: str, state: ledger.Recorded) -> list[tuple[str, int]]:
    """The landed syncs reserved after the history table's last transaction (`state`) that name
    a landed table it applies: (sync id, transaction id), in id order. The table owes them: a
    transaction of its own with a later id first (a cleanup, revert, rewind, undo) would leave
    it unable to apply them, since a table's ids only go forward. A sync given up is owed by no
    table. Two small reads, an operation's."""
    return [
        (r.sync_id, int(r.txn_id))
        for r in spark.sql(
            f"""
            select s.`sync_id`, s.`txn_id`
            from {syncs_relation(transactions)} as s
            where s.`txn_id` > {int(state.history_last_id)}
              and not startswith(s.`sync_id`, {lit(OPERATION_SYNC_PREFIX)})
              and not exists (
                select 1 from {transactions} as a where a.`txn_id` = s.`txn_id` and a.`operation` = {lit(ABANDON)}
              )
              and exists (
                select 1 from {transactions} as t
                where t.`history_table` = {lit(history)}
                  and t.`operation` = 'batch' and array_contains(s.`tables`, t.`source_table`)
              )
            order by s.`txn_id`
            """
        ).collect()  # the syncs reserved and not yet applied: a handful
    ]


def owed_message(operation: str, history: str, found: list[tuple[str, int]]) -> str:
    listed = ", ".join(f"{sync_id} (transaction {txn_id})" for sync_id, txn_id in found)
    return (
        f"{operation} of {history} refused: the table owes the sync(s) {listed}, reserved before this {operation}"
        f" would take its transaction, and a table's transactions only go forward. Apply them first (run its"
        f" history model), or give up a sync whose batch will never land (dbt run-operation"
        f" lakehistory.abandon_sync), then {operation} again. Nothing was changed."
    )
