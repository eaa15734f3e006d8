"""A snapshot capture's or a cleanup's statements, run as the next transaction.

The macros write the statements (a capture's MERGE into its `_hx` or snapshot table, a cleanup's
deletes) and the query of the transaction's row; the engine takes the id under the writer lock,
runs them with the id in session variables and records the row, all in one hold.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, records, syncs, turn
from lakehistory.history.plan import refuse_during_stopped_revert
from lakehistory.history.session import session_conf
from lakehistory.history.transactions import COLUMNS
from lakehistory.history.writer import Writer
from lakehistory.landing import extracts, run_reads

# The session variables a capture's or cleanup's statements read their transaction from.
SESSION_TXN_ID = "system.session.lakehistory_txn_id"
SESSION_STARTED_AT = "system.session.lakehistory_started_at"
SESSION_DELTA_VERSION = "system.session.lakehistory_delta_version"


def run_transaction(
    spark: SparkSession,
    writer: Writer,
    statements: Sequence[str],
    row: str,
    versioned: str,
    capture_of: str | None = None,
) -> int:
    """For `lakehistory.run_transaction` (snapshot captures and cleanups): as the one
    writer, record what any history table committed and the transactions table lacks, take the
    next id, run `statements` and then record the transaction's row (`row`, a query of the
    transactions table's columns, in order). They read the id and its start from the session
    variables SESSION_TXN_ID and SESSION_STARTED_AT; `row` also reads SESSION_DELTA_VERSION, the Delta version of
    `versioned` after the statements. Returns the id. `capture_of`: the snapshot whose capture
    this is; when its extract belongs to a sync, the transaction is the sync's (its id, start,
    author and app), reserved here if no table of the sync has reserved it yet.

    Taking the id and recording it in one call under the lock keeps another writer (another
    process, or a history model in another dbt thread) from taking the same id in between.
    Session variables because Delta's statements bind no SQL parameters; the values set are
    numbers and a time this function makes."""
    transactions = writer.transactions
    with turn.taking(spark, writer, "capture" if capture_of else "cleanup") as my:
        spark = my.spark
        state = my.recover_every(versioned)
        refuse_during_stopped_revert(spark, transactions, versioned, state)
        if capture_of is None and (owed := syncs.owed(spark, transactions, versioned, state)):
            raise HistoryError(syncs.owed_message("cleanup", versioned, owed))
        sync = extracts.staged_sync(writer.invocation, capture_of) if capture_of else None
        if sync is None:
            txn_id, started_at = state.last_id + 1, ledger.transaction_times(state.last_started, 1)[0]
        else:
            run = run_reads.pending_syncs(writer.invocation, transactions)
            reserved = syncs.reserve(spark, transactions, {**run, sync.id: sync}.values(), state)[0][sync.id]
            if reserved.abandoned:
                raise HistoryError(reserved.abandoned_message(f"the extract {capture_of} captures"))
            txn_id, started_at = reserved.txn_id, reserved.started_at
            if txn_id <= state.history_last_id:
                raise HistoryError(
                    f"the extract {capture_of} captures belongs to sync {sync.id}, whose transaction {txn_id} is"
                    f" not after transaction {state.history_last_id}, which {capture_of} already recorded: a table's"
                    " transactions only go forward. Nothing was captured."
                )
        _declare(spark, SESSION_TXN_ID, "bigint", str(txn_id))
        _declare(spark, SESSION_STARTED_AT, "timestamp", f"timestamp'{started_at}'")
        with records.committing([versioned] if statements else []):
            # A cleanup's commits carry its transaction, as a batch's do: stopped before its row is
            # recorded, the next writer records it from the history table's commit (ledger.recover).
            carried = {ledger.USER_METADATA: _carried(spark, row, started_at)} if statements else {}
            with session_conf(spark, carried):
                for statement in statements:
                    spark.sql(statement)
            version = spark.sql(f"describe history {versioned} limit 1").collect()[0].version
            _declare(spark, SESSION_DELTA_VERSION, "bigint", str(int(version)))
            lock.check_held()
            # materialized first: a capture's row reads the transactions table, which the statement
            # recording it writes
            rows = spark.sql(row).toDF(*COLUMNS)
            if sync is not None:  # the sync's, as every table of it records them
                shared = {"author": sync.author, "app_id": sync.app_id, "sync_id": sync.id}
                rows = rows.withColumns({name: F.lit(value).cast("string") for name, value in shared.items()})
            ledger.insert_transactions(spark, transactions, rows.localCheckpoint(), txn_id)
    return txn_id


def _carried(spark: SparkSession, row: str, started_at: str) -> str:
    """The commit metadata of a cleanup's transaction: its row (`row`, read before the cleanup's
    statements, with no Delta version yet), as recovery records it."""
    _declare(spark, SESSION_DELTA_VERSION, "bigint", "-1")
    r = spark.sql(row).toDF(*COLUMNS).collect()[0]  # the transaction's one row
    txn = ledger.Txn(
        txn_id=int(r.txn_id),
        batch_id=r.batch_id,
        sequence=r.batch_sequence,
        source_table=r.source_table,
        author=r.author,
        app_id=r.app_id,
        commit_message=r.commit_message,
        started_at=started_at,
        rows_in=int(r.rows_in),
        versions_opened=int(r.versions_opened),
        versions_closed=int(r.versions_closed),
        rows_overlap_deleted=int(r.rows_overlap_deleted),
        operation=r.operation,
        rows_purged=int(r.rows_purged),
    )
    return ledger.commit_metadata([txn])


def _declare(spark: SparkSession, variable: str, sql_type: str, value: str) -> None:
    spark.sql(f"declare or replace variable {variable.rsplit('.', 1)[1]} {sql_type} default {value}")
