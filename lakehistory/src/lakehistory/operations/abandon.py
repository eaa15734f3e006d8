"""Giving up a sync: a sync some table will never apply stops holding back the consistent cut.

    lakehistory.door.abandon_sync   # from lakehistory.abandon_sync, through the door

A sync is visible to readers once every table it names has applied it (syncs.py). When one of
its batches never lands (a connector's run that failed half way and was never delivered again),
the consistent cut (`version_at`, `as_of_time`, the default tag) stays before it for good. Giving
it up records one row in the transactions table under the sync's own id, operation 'abandon',
for the syncs table, with who gave it up, when and why: the sync is then visible with what the
tables that applied it hold (an undo of it takes that back too), no table owes it, and a batch of
it landing later is refused, naming this command. Ids stay gap-free, a sync that no table applied
included: its id is this row's.

A revert's, undo's, rewind's or branch publish's transaction stopped before every table recorded
it (`lakehistory:<operation>:<id>`, as its message names it) holds those tables until it
completes; when it cannot (the branch it published is gone), giving it up records an abandon row
for each table that had not recorded it, and the tables take transactions again.

One commit, under the writer lock, after recording what any history table committed and the
transactions table lacks: killed before it, nothing changed; after it, asked again, it answers
that the sync was given up already.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, turn
from lakehistory.history.transactions import ABANDON, COLUMNS, OPERATION_SYNC_PREFIX, syncs_relation
from lakehistory.history.writer import Writer
from lakehistory.operations import branches

APP_ID = "lakehistory.abandon_sync"
COUNTS = ("rows_in", "versions_opened", "versions_closed", "rows_overlap_deleted", "rows_purged")


def abandon_sync(
    spark: SparkSession,
    writer: Writer,
    sync_id: str,
    author: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Give up the reserved sync `sync_id`. Returns its transaction, the landed tables that had
    applied it and those that had not, and whether it was given up already."""
    transactions = writer.transactions
    table = syncs_relation(transactions)
    with turn.taking(spark, writer, "abandon") as my:
        spark = my.spark
        my.recover_every(table)
        found = _sync(spark, transactions, sync_id)
        if found is None:
            raise HistoryError(
                f"abandon_sync: no sync {sync_id!r} is reserved. A sync is reserved when the first of its tables"
                " applies it, and until then the consistent cut does not wait for it. To drop a sync no table has"
                " applied, remove its batches from the landing. Nothing was changed."
            )
        outcome = {
            "transaction": int(found.txn_id),
            "applied": sorted(found.applied),
            "waiting": sorted(set(found.tables) - set(found.applied)),
            "already_done": found.abandoned,
        }
        if found.abandoned:
            return outcome
        who = author or spark.sql("select current_user()").collect()[0][0]
        if sync_id.startswith(OPERATION_SYNC_PREFIX):
            return _abandon_operation(spark, writer, found, sync_id, who, reason)
        if not outcome["waiting"]:
            raise HistoryError(
                f"abandon_sync: every table of sync {sync_id} applied it (transaction {found.txn_id}): there is"
                " nothing to give up. To take its changes back, undo it:"
                f" dbt run-operation lakehistory.undo --args '{{txn_id: {found.txn_id}}}'. Nothing was changed."
            )
        message = f"gave up sync {sync_id}: {', '.join(outcome['waiting'])} never applied it" + (
            f" ({reason})" if reason else ""
        )
        version = int(spark.sql(f"describe history {table} limit 1").collect()[0].version)
        row = _abandon_rows(spark, writer, sync_id, {table: version}, who, message)
        lock.check_held()
        ledger.insert_transactions(spark, transactions, row, int(found.txn_id))
        return outcome


def _abandon_operation(
    spark: SparkSession, writer: Writer, found: Row, sync_id: str, who: str, reason: str | None
) -> dict[str, Any]:
    """Give up a revert's, undo's, rewind's or branch publish's transaction that stopped before
    every table recorded it, and cannot complete (its branch is gone, say): each table that has
    not recorded it gets an abandon row under its id, so that its next transaction may come. A
    table that committed it and had not recorded it is recorded first: that part stays."""
    transactions = writer.transactions
    for table in sorted(set(found.tables) - set(found.applied)):
        writer.recover(spark, table)
    found = _sync(spark, transactions, sync_id) or found  # reserved: it is still there
    waiting = sorted(set(found.tables) - set(found.applied))
    outcome = {
        "transaction": int(found.txn_id),
        "applied": sorted(found.applied),
        "waiting": waiting,
        "already_done": not waiting,
    }
    if not waiting:  # every table had committed it: it is complete now
        branches.drop_publish_checkpoints(spark, transactions, found.request)
        return outcome
    message = f"gave up {sync_id.removeprefix(OPERATION_SYNC_PREFIX)}: {', '.join(waiting)} never recorded it" + (
        f" ({reason})" if reason else ""
    )
    rows = _abandon_rows(spark, writer, sync_id, {t: _last_version(spark, t) for t in waiting}, who, message)
    lock.check_held()
    ledger.insert_transactions(spark, transactions, rows, int(found.txn_id))
    branches.drop_publish_checkpoints(spark, transactions, found.request)
    return outcome


def _abandon_rows(
    spark: SparkSession, writer: Writer, sync_id: str, versions: dict[str, int], who: str, message: str
) -> DataFrame:
    """An abandon row under the reservation of `sync_id` for each table of `versions` (its Delta
    version then), in the transactions table's columns."""
    reserved = spark.table(syncs_relation(writer.transactions)).where(F.col("sync_id") == F.lit(sync_id))
    tables = spark.createDataFrame(list(versions.items()), "history_table string, delta_version bigint")
    return (
        reserved.select("txn_id", "started_at", "sync_id")
        .crossJoin(tables)
        .select(
            "txn_id",
            F.expr(writer.uuid_sql).alias("txn_uuid"),
            F.lit(ABANDON).alias("operation"),
            F.lit(None).cast("string").alias("source_table"),
            "history_table",
            F.lit(None).cast("string").alias("batch_id"),
            F.lit(None).cast("bigint").alias("batch_sequence"),
            F.lit(who).cast("string").alias("author"),
            F.lit(APP_ID).alias("app_id"),
            F.lit(message).alias("commit_message"),
            "started_at",
            F.current_timestamp().alias("committed_at"),
            *(F.lit(0).cast("bigint").alias(c) for c in COUNTS),
            "delta_version",
            "sync_id",
            F.lit(None).cast("string").alias("commit_json"),
            F.lit(None).cast("string").alias("schema_changes"),
        )
        .select(*COLUMNS)
    )


def _last_version(spark: SparkSession, table: str) -> int:
    """The table's last Delta version (0 for a table that is gone): what its abandon row records."""
    if not spark.catalog.tableExists(table.replace("`", "")):
        return 0
    return int(spark.sql(f"describe history {table} limit 1").collect()[0].version)


def _sync(spark: SparkSession, transactions: str, sync_id: str) -> Row | None:
    """The sync's reservation (its id and landed tables), the tables that recorded it, and whether
    it was given up; None when it is not reserved. Two small reads."""
    reserved = (
        spark.table(syncs_relation(transactions))
        .where(F.col("sync_id") == F.lit(sync_id))
        .select("txn_id", "tables", "request")
    ).collect()  # one row, or none
    if not reserved:
        return None
    txn_id, tables, request = int(reserved[0].txn_id), list(reserved[0].tables), reserved[0].request
    return (
        spark.table(transactions)
        .where(F.col("txn_id") == F.lit(txn_id))
        .agg(
            F.array_intersect(
                F.lit(tables).cast("array<string>"),
                F.array_union(F.collect_set("source_table"), F.collect_set("history_table")),
            ).alias("applied"),
            F.coalesce(F.max(F.col("operation") == F.lit(ABANDON)), F.lit(False)).alias("abandoned"),
        )
        .select(
            F.lit(txn_id).alias("txn_id"),
            F.lit(tables).cast("array<string>").alias("tables"),
            F.lit(request).cast("string").alias("request"),
            "*",
        )
        .collect()[0]  # an aggregate: one row
    )
