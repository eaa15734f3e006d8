"""Revert and undo: a history table returned to an earlier state as a new transaction.

    adapter.call_python('lakehistory.history.revert:revert', {...})   # lakehistory.revert, lakehistory.undo

History is kept. The new transaction n closes (valid_to = n) the current rows the earlier state
lacks and opens copies (valid_from = n) of that state's rows that are no longer current, in one
Delta MERGE. Its commit carries the transaction (operation 'revert') the way a batch's commit does
(ledger.py): a run stopped between the commit and its record is recorded by the next writer, and
the event history, the feature states and the `_hx` tables read a revert like any other change.

    revert  the whole table as of transaction v: every row current then (valid_from <= v < valid_to)
    undo    the keys one transaction changed, as they were before it; refused, naming the later
            transactions, when any of them changed one of those keys since
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakehistory.history import ledger, writer
from lakehistory.history.apply import record_commit, recover
from lakehistory.history.group import MERGE_SOURCE_COPY, own_commit
from lakehistory.history.session import own_session, session_conf
from lakehistory.history.sql import cols, q, same_key
from lakehistory.history.table import HistoryError, Versioning
from lakehistory.names import VALID_FROM, VALID_TO

REVERT_VIEW = "`__lh_revert`"
SYSTEM_TIME = (VALID_FROM, VALID_TO)


def revert(
    spark: SparkSession,
    target: str,
    transactions: str,
    keys: Sequence[str],
    versioning: dict,
    uuid_sql: str,
    writer_lock: str,
    history_tables: Sequence[str] = (),
    invocation_id: str = "",
    to_txn: int | None = None,
    undo_txn: int | None = None,
    author: str | None = None,
    writer_wait_seconds: float = 600,
) -> dict:
    """Entry point for `lakehistory.revert` (`to_txn`) and `lakehistory.undo` (`undo_txn`), as
    the one writer of the transactions table. Returns the new transaction's id (None when the
    table already is in the state asked for) and its counts."""
    versions = Versioning(**versioning)
    if versions.append_only:
        raise HistoryError(f"{target}: an append-only history table (valid_from only) cannot be reverted")
    asked = int(to_txn if to_txn is not None else undo_txn)  # type: ignore[arg-type]
    with writer.holding(spark, writer_lock, writer_wait_seconds), own_session(spark) as spark:
        state, _ = recover(spark, transactions, target, history_tables, invocation_id, uuid_sql)
        log = spark.table(transactions)
        # the start as text in the session's time zone (UTC), not in the Python process's
        started = F.date_format("started_at", "yyyy-MM-dd HH:mm:ss.SSS").alias("started")
        txn = log.where(F.col("txn_id") == F.lit(asked)).select("*", started).first()
        if txn is None or asked > state.last_id:
            raise HistoryError(f"{target}: there is no transaction {asked} (the last one is {state.last_id})")
        _refuse_after_cleanup(log, target, asked if undo_txn is None else asked - 1)
        at = _version(versions, txn)
        if undo_txn is None:
            what = f"revert to transaction {asked}"
            leaving, coming = _revert_rows(versions, at)
        else:
            if txn.history_table != target or txn.operation not in ("batch", "revert"):
                raise HistoryError(f"{target}: transaction {asked} is a {txn.operation} of {txn.history_table}")
            _refuse_later_changes(spark, log, target, keys, versions, txn)
            what = f"undo of transaction {asked}" + (f" (batch {txn.batch_id})" if txn.batch_id else "")
            leaving, coming = _undo_rows(versions, at)
        row = [c for c in spark.table(target).columns if c not in SYSTEM_TIME]
        frame = spark.sql(_changes_sql(target, keys, row, leaving, coming)).localCheckpoint()
        counts = frame.agg(F.count_if("_lh_close").alias("closed"), F.count_if(~F.col("_lh_close")).alias("opened"))
        closed, opened = counts.collect()[0]  # an aggregate: one row
        if not closed and not opened:
            return {"transaction": None, "versions_opened": 0, "versions_closed": 0}
        started_at = ledger.transaction_times(state.last_started, 1)[0]
        new = ledger.Txn(
            txn_id=state.last_id + 1,
            batch_id=None,
            sequence=None,
            source_table=_source_table(log, target),
            author=author or spark.sql("select current_user()").collect()[0][0],
            app_id="lakehistory.undo" if undo_txn is not None else "lakehistory.revert",
            commit_message=what,
            started_at=started_at,
            rows_in=0,
            versions_opened=int(opened),
            versions_closed=int(closed),
            rows_overlap_deleted=0,
            operation="revert",
        )
        version = str(new.txn_id) if versions.version_type == "integer" else f"timestamp'{started_at}'"
        frame.createOrReplaceTempView(REVERT_VIEW.strip("`"))
        try:
            # The view is a local checkpoint: fixed, so Delta need not copy it before reading it twice.
            writer.check_held()
            conf = {ledger.USER_METADATA: ledger.commit_metadata([new]), MERGE_SOURCE_COPY: "none"}
            with session_conf(spark, conf):
                spark.sql(_merge_sql(target, keys, row, versions, version))
        finally:
            spark.catalog.dropTempView(REVERT_VIEW.strip("`"))
        commit = own_commit(spark, target, [new])
        record_commit(spark, transactions, target, commit, uuid_sql, stop=lambda point: None)
        return {"transaction": new.txn_id, "versions_opened": new.versions_opened, "versions_closed": closed}


def _version(versions: Versioning, txn: Row) -> str:
    """The history table's version value of a transaction, as SQL: its id, or its start."""
    if versions.version_type == "integer":
        return str(int(txn.txn_id))
    return f"timestamp'{txn.started}'"


def _revert_rows(versions: Versioning, at: str) -> tuple[str, str]:
    """What leaves (current, opened after `at`) and what comes back (current at `at`, closed since)."""
    return (
        f"{versions.is_current('h')} and h.`valid_from` > {at}",
        f"h.`valid_from` <= {at} and h.`valid_to` > {at} and not ({versions.is_current('h')})",
    )


def _undo_rows(versions: Versioning, at: str) -> tuple[str, str]:
    """What leaves (the rows the transaction at `at` opened, still current) and what comes back
    (those it closed): nothing later changed their keys (_refuse_later_changes)."""
    return f"h.`valid_from` = {at} and {versions.is_current('h')}", f"h.`valid_to` = {at}"


def _changes_sql(target: str, keys: Sequence[str], row: Sequence[str], leaving: str, coming: str) -> str:
    """The rows to close (`_lh_close`) and to copy: those leaving and coming, but a row that comes
    back as it leaves (same key, same Fivetran version, same values), which stays as it is."""
    same = " and ".join(
        [same_key("l", "c", keys), "l.`_fivetran_start` = c.`_fivetran_start`"]
        + [f"l.{q(c)} <=> c.{q(c)}" for c in row if c not in keys and c != "_fivetran_start"]
    )
    return f"""
        with
            leaving as (select * from {target} as h where {leaving}),
            coming as (select * from {target} as h where {coming})
        select l.*, true as `_lh_close` from leaving as l left anti join coming as c on {same}
        union all
        select c.*, false as `_lh_close` from coming as c left anti join leaving as l on {same}
    """


def _merge_sql(target: str, keys: Sequence[str], row: Sequence[str], versions: Versioning, version: str) -> str:
    return f"""
        merge into {target} as t
        using {REVERT_VIEW} as s
        on s.`_lh_close` and {same_key("t", "s", keys)}
            and t.`_fivetran_start` = s.`_fivetran_start` and t.`valid_from` = s.`valid_from`
        when matched then update set t.`valid_to` = {version}
        when not matched and not s.`_lh_close` then
            insert ({cols(row)}, `valid_from`, `valid_to`) values ({cols(row, "s")}, {version}, {versions.open})
    """


def _refuse_after_cleanup(log: DataFrame, target: str, needed: int) -> None:
    """A cleanup after transaction `needed` may have removed rows of the state it asks for."""
    cleanups = [
        r.txn_id
        for r in log.where(
            (F.col("history_table") == F.lit(target))
            & (F.col("operation") == F.lit("cleanup"))
            & (F.col("txn_id") > F.lit(needed))
        )
        .select("txn_id")
        .collect()  # one row per cleanup
    ]
    if cleanups:
        raise HistoryError(
            f"{target}: cleanup transaction(s) {', '.join(map(str, sorted(cleanups)))} removed versions after"
            f" transaction {needed}, so its state can no longer be restored exactly"
        )


def _refuse_later_changes(
    spark: SparkSession, log: DataFrame, target: str, keys: Sequence[str], versions: Versioning, txn: Row
) -> None:
    """Undo only when no transaction after `txn` changed a key `txn` changed."""
    at = _version(versions, txn)
    key_list = cols(keys)
    later = spark.sql(f"""
        select distinct l.`v` from (
            select distinct {key_list} from {target} where `valid_from` = {at} or `valid_to` = {at}
        ) as k
        inner join (
            select {key_list}, `valid_from` as `v` from {target} where `valid_from` > {at}
            union all
            select {key_list}, `valid_to` as `v` from {target} as h
            where h.`valid_to` > {at} and not ({versions.is_current("h")})
        ) as l on {same_key("k", "l", keys)}
    """)
    column = "txn_id" if versions.version_type == "integer" else "started_at"
    named = (
        log.join(later, F.col(column) == F.col("v"))
        .where(F.col("history_table") == F.lit(target))
        .select("txn_id", "batch_id")
        .orderBy("txn_id")
        .collect()  # one row per later transaction
    )
    if named:
        listed = ", ".join(f"{r.txn_id}" + (f" (batch {r.batch_id})" if r.batch_id else "") for r in named)
        raise HistoryError(
            f"{target}: transaction {txn.txn_id} cannot be undone on its own: later transactions changed the same"
            f" keys: {listed}. Undo those first, or revert the table to transaction {txn.txn_id - 1}"
            " (lakehistory.revert)."
        )


def _source_table(log: DataFrame, target: str) -> str | None:
    """The landed table behind `target`, from its batches' transactions."""
    row = (
        log.where((F.col("history_table") == F.lit(target)) & F.col("source_table").isNotNull())
        .select("source_table")
        .limit(1)
        .first()
    )
    return row.source_table if row else None
