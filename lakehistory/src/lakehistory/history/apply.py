"""The `fivetran_history` strategy's engine: applies a history table's pending batches.

    lakehistory.door.apply_pending   # from the strategy macro, through the door

Per run of a history model (one that finds no batch staged, no column to add and no commit of
its table unrecorded stops before step 1, without the writer lock; of a table that has every
column, the first group's changes of step 3 are computed before it, while other models write):
1. Record what the history table committed that the transactions table lacks (ledger.py), for
   this table and, when the writer lock was not let go cleanly by its last holder (a killed run,
   a lapsed hold: lock.py), for every history table of the project, so that no new
   transaction id can repeat an id a stopped run already committed.
2. Drop the staged batches that step 1 just recorded (staging left out those recorded before):
   which batches are applied is decided by the history tables' own commits, so a run stopped
   after its commit never applies a batch twice. Give each of the rest its transaction: a batch
   of a sync the id reserved for the sync (syncs.py, reserved here if no other table of it has),
   a batch of its own the next id.
3. Apply the rest in groups of consecutive batches (group.py, by the rules of rules.py): one
   query computes the group's changes, one Delta MERGE (or a plain append when no stored row
   closes) writes them, and the commit carries the group's transactions. A batch with a truncate
   or schema change starts a group (its rewrite of the stored rows reaches beyond its keys); a
   batch whose version clashes with a stored row is refused after the batches before it are
   applied; a batch that puts a version below a row still there ends its group.
4. Record the group's transactions (gap-free ids in batch order, each with its own counts; a
   sync's row beside its other tables' rows, under the same id).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehistory.history import ledger, lock, records, syncs
from lakehistory.history.group import (
    ROW_KINDS,
    SKIP_EMPTY_COMMITS,
    Batch,
    Changes,
    clash_message,
    compute_changes,
    own_commit,
    version_sql,
    write_group,
)
from lakehistory.history.layout import Layout
from lakehistory.history.session import SMALL_BATCH_ROWS, SMALL_BATCH_SETTINGS, own_session, session_conf
from lakehistory.history.table import (
    HistoryError,
    Versioning,
    add_new_columns,
    columns_to_change,
    create_table,
    layout_of,
)
from lakehistory.history.transactions import COLUMNS, compact_tables
from lakehistory.landing import extracts, run_reads
from lakehistory.landing.syncs import SyncOf
from lakehistory.sql import q

__all__ = ["HistoryError", "apply_pending", "recover", "run_transaction"]

# Which dbt invocations have read the transactions table afresh (it may have been changed by
# hand between two invocations of one process).
_recovered_invocations: set[str] = set()
# Per (invocation, transactions table): the batches this process's recoveries recorded, as
# (history table, source table, batch id). A model may have staged one of them from what the
# invocation read at its start (landing.run_reads), before another model's recovery recorded it:
# it is not applied.
Recovered = set[tuple[str, str | None, str | None]]
_recovered_batches: dict[tuple[str, str], Recovered] = {}
# Per (invocation, transactions table): what the transactions table held for every history table
# when the invocation's first idle check read it (see _recorded_at_start).
_recorded_at: dict[tuple[str, str], dict[str, ledger.Recorded]] = {}
_recorded_lock = threading.Lock()


# The points between the statements of a run where a stop (a killed process, a lost connection)
# leaves the tables in a different state. Tests stop a run at each in turn and run it again.
STOP_POINTS = ("columns_added", "recovered", "reserved", "computed", "committed", "recorded")
GROUP_STOP_POINTS = ("computed", "committed", "recorded")  # once per group


def _reached(point: str) -> None:
    """A named point of the run (see STOP_POINTS); nothing happens here."""


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
    versioning: Versioning,
    uuid_sql: str,
    exists: bool,
    writer_lock: str,
    history_tables: Sequence[str] = (),
    invocation_id: str = "",
    max_batches_per_commit: int | None = None,
    writer_wait_seconds: float = 600,
) -> dict[str, Any]:
    """For the strategy macro (lakehistory.door): apply the pending batches in `staged` (the model's
    rows, a view of lakehistory.landing_batches) to the history table `target`, at most
    `max_batches_per_commit` batches per group (None: as many as the rules allow), as the one
    writer of the transactions table (`writer_lock`, waiting up to `writer_wait_seconds`)."""

    # The statements run in a copy of dbt's session (session.py); the writer lock is this process's.
    with own_session(spark) as own, contextlib.ExitStack() as sized:
        layout = layout_of(own, staged, keys, deleted_column, table=target)
        staged_batches = _staged_batches(own, staged, layout.keys[0])
        sized.enter_context(session_conf(own, settings_for(staged_batches)))
        ready = exists and not any(columns_to_change(own, target, layout))
        # Staging found every landed batch recorded. Unless the table holds a commit the ledger
        # lacks (a stopped revert, capture or cleanup), it is left as it is, checked as every run
        # checks it, without waiting for the writer lock.
        if ready and not staged_batches:
            state = _recorded_at_start(own, transactions, target, history_tables, invocation_id)
            if not ledger.unrecorded_commits(own, target, state):
                return {"batches": 0, "groups": 0, "transactions": []}
        # The first group's changes read only this table and its staged rows, which no other
        # writer changes: they are computed before the writer lock, while other models of the run
        # write. Under the lock they stand unless a recovery changed what is pending.
        early = None
        if ready:
            early = _early_changes(
                own, target, staged, layout, versioning, staged_batches, max_batches_per_commit, writer_lock
            )
        with lock.holding(spark, writer_lock, writer_wait_seconds):
            if not exists:
                create_table(own, target, layout, versioning)
            else:
                add_new_columns(own, target, layout)
            _reached("columns_added")
            outcome = Outcome()
            try:
                latest = early.latest if early is not None and early.hold == lock.hold_of(writer_lock) else None
                state, recovered = recover(own, transactions, target, history_tables, invocation_id, uuid_sql, latest)
                _reached("recovered")
                if not exists and state.history_last_id:
                    raise HistoryError(_dropped_message(target, state))
                recovered |= _recovered_batches[(invocation_id, transactions)]
                pending = _not_applied_meanwhile(target, _pending(target, staged_batches, recovered), state)
                refused = _unconfigured_deleted_column(pending, layout)
                applicable = pending[: pending.index(refused)] if refused else pending
                plan, state = _transactions_of(own, transactions, target, applicable, state, invocation_id)
                for txn_id, started_at, _ in plan:
                    versioning.refuse_past_open_end(txn_id, started_at, target)
                _reached("reserved")
                at = 0
                while at < len(applicable):
                    group = applicable[at : _group_end(applicable, at, max_batches_per_commit)]
                    computed = early.of(group, state) if early is not None and at == 0 else None
                    taken, state = _apply_group(
                        own,
                        target,
                        staged,
                        transactions,
                        layout,
                        versioning,
                        uuid_sql,
                        group,
                        plan[at : at + len(group)],
                        state,
                        outcome,
                        computed,
                        outside_turn=all(sync_id is not None for _, _, sync_id in plan),
                    )
                    at += taken
                if refused:
                    raise HistoryError(_deleted_column_message(refused, layout))
            except Exception:
                if not exists:
                    _drop_if_never_written(own, target)
                raise
            return {"batches": outcome.batches, "groups": outcome.groups, "transactions": outcome.transactions}


def settings_for(batches: Sequence[Batch]) -> dict[str, str]:
    """The session settings an apply of `batches` runs with: those of a small batch (session.py)
    when they are few rows that rewrite no stored row beyond their keys, the profile's otherwise."""
    if sum(b.rows_in for b in batches) <= SMALL_BATCH_ROWS and not any(b.rewrites for b in batches):
        return dict(SMALL_BATCH_SETTINGS)
    return {}


def _group_end(applicable: list[Batch], at: int, max_batches_per_commit: int | None) -> int:
    """Where the group that starts at `applicable[at]` ends at the latest: before the next batch
    that rewrites stored rows, after `max_batches_per_commit` batches."""
    end = next((i for i in range(at + 1, len(applicable)) if applicable[i].rewrites), len(applicable))
    return min(end, at + int(max_batches_per_commit)) if max_batches_per_commit else end


@dataclass(frozen=True)
class _Early:
    """A first group's changes computed before the writer lock, against the table at `version`,
    its last commit then (`latest`, a row of its `describe history`), while this process held the
    lock as `hold` (lock.hold_of; None: it did not). A commit of the table since then takes the
    lock: if the hold is the same under it, `latest` is still the table's last commit."""

    batches: list[Batch]
    changes: Changes
    version: int
    latest: Any = None
    hold: int | None = None

    def of(self, group: list[Batch], state: ledger.Recorded) -> tuple[list[Batch], Changes] | None:
        """These changes, if they still stand under the lock: the group starts with the same
        batches (no recovery dropped one) and the table's last commit is still the one they were
        computed against (the transactions table records it as the table's last: no other
        writer, such as a revert from another process, changed the table meanwhile)."""
        if group[: len(self.batches)] != self.batches or state.delta_version != self.version:
            return None
        return self.batches, self.changes


def _early_changes(
    spark: SparkSession,
    target: str,
    staged: str,
    layout: Layout,
    versioning: Versioning,
    staged_batches: list[Batch],
    max_batches_per_commit: int | None,
    writer_lock: str,
) -> _Early | None:
    """The first group's batches and changes of a table that has every column, computed before
    the writer lock; None where the batches need the lock's checks first (a clash, a refused
    deleted column: a recovery under the lock may yet drop the batch at fault)."""
    if not staged_batches or _unconfigured_deleted_column(staged_batches, layout) is not None:
        return None
    hold = lock.hold_of(writer_lock)  # before the read: a take after it is a new hold
    latest = spark.sql(f"describe history {target} limit 1").collect()[0]
    try:
        group = staged_batches[: _group_end(staged_batches, 0, max_batches_per_commit)]
        n, changes = _changes_of(spark, target, staged, layout, versioning, group)
    except HistoryError:
        return None
    return _Early(group[:n], changes, int(latest.version), latest, hold)


def _recorded_at_start(
    spark: SparkSession, transactions: str, target: str, history_tables: Sequence[str], invocation_id: str
) -> ledger.Recorded:
    """What the transactions table holds for `target`, as the invocation's first idle check read
    it for every history table in one scan. The table's own commits come from its own model
    only, which is this call; a record made since (another model's recovery) can only make its
    commits look unrecorded, and the run then checks them again under the writer lock."""
    key = (invocation_id, transactions)
    with _recorded_lock:
        if not invocation_id or target not in _recorded_at.get(key, {}):
            _recorded_at.clear()  # one invocation at a time per process
            _recorded_at[key] = ledger.recorded_for(spark, transactions, sorted({*history_tables, target}))
        return _recorded_at[key].pop(target)


def _drop_if_never_written(spark: SparkSession, target: str) -> None:
    """A first run that failed before its first commit leaves no empty table behind: the next run
    creates it again, with the columns the rows have then."""
    if spark.sql(f"describe history {target} limit 1").collect()[0].version == 0:
        spark.sql(f"drop table if exists {target}")


# --- captures and cleanups --------------------------------------------------------------------------


# The session variables a capture's or cleanup's statements read their transaction from.
SESSION_TXN_ID = "system.session.lakehistory_txn_id"
SESSION_STARTED_AT = "system.session.lakehistory_started_at"
SESSION_DELTA_VERSION = "system.session.lakehistory_delta_version"


def run_transaction(
    spark: SparkSession,
    transactions: str,
    history_tables: Sequence[str],
    uuid_sql: str,
    writer_lock: str,
    statements: Sequence[str],
    row: str,
    versioned: str,
    invocation_id: str = "",
    writer_wait_seconds: float = 600,
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
    with lock.holding(spark, writer_lock, writer_wait_seconds), own_session(spark) as spark:
        state = recover_every(spark, transactions, history_tables, invocation_id, uuid_sql, versioned)
        _refuse_during_stopped_revert(spark, transactions, versioned, state)
        if capture_of is None and (owed := syncs.owed(spark, transactions, versioned, state)):
            raise HistoryError(syncs.owed_message("cleanup", versioned, owed))
        sync = extracts.staged_sync(capture_of) if capture_of else None
        if sync is None:
            txn_id, started_at = state.last_id + 1, ledger.transaction_times(state.last_started, 1)[0]
        else:
            run = run_reads.pending_syncs(invocation_id, transactions)
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


# --- what is pending ---------------------------------------------------------------------------------


def recover(
    spark: SparkSession,
    transactions: str,
    target: str,
    history_tables: Sequence[str],
    invocation_id: str,
    uuid_sql: str,
    latest: Any = None,
) -> tuple[ledger.Recorded, Recovered]:
    """Record unrecorded commits: of `target` and of the other tables (`_recover_others`).
    Returns the transactions table's state for `target` (checked last, so that its last id counts
    every other table's) and the batches just recorded, as (history table, source table, batch id).
    `latest`: `target`'s last commit, when the caller knows it is still the last."""
    recovered, state = _recover_others(spark, transactions, {target}, history_tables, invocation_id, uuid_sql, target)
    lock.unrecorded.discard(target)
    records.withdraw(transactions, target)
    state, txns = ledger.recover(spark, transactions, target, uuid_sql, state, latest)
    mine = [(target, t) for t in txns]
    _note_recovered(invocation_id, transactions, mine)
    return state, {(table, t.source_table, t.batch_id) for table, t in recovered + mine}


def _note_recovered(invocation_id: str, transactions: str, txns: list[tuple[str, ledger.Txn]]) -> None:
    key = (invocation_id, transactions)
    if key not in _recovered_batches:
        _recovered_batches.clear()  # one invocation at a time per process
        _recovered_batches[key] = set()
    _recovered_batches[key].update((table, t.source_table, t.batch_id) for table, t in txns)


def recover_every(
    spark: SparkSession,
    transactions: str,
    history_tables: Sequence[str],
    invocation_id: str,
    uuid_sql: str,
    then: str,
) -> ledger.Recorded:
    """For a transaction of no history table's own commit (a capture, a cleanup, a sync given up):
    record what any history table committed and the transactions table lacks (_recover_others);
    returns what the transactions table then holds for `then`."""
    _, state = _recover_others(spark, transactions, set(), history_tables, invocation_id, uuid_sql, then)
    return state or ledger.recorded(spark, transactions, then)


def _recover_others(
    spark: SparkSession,
    transactions: str,
    skip: set[str],
    history_tables: Sequence[str],
    invocation_id: str,
    uuid_sql: str,
    then: str,
) -> tuple[list[tuple[str, ledger.Txn]], ledger.Recorded | None]:
    """Record unrecorded commits of the tables whose record this process could not write, and of
    every history table once per hold of the writer lock whose last holder may have left one
    (lock.must_check_every_table), but those in `skip`. Returns the transactions
    recorded, and what the transactions table holds for the table `then` the caller checks next:
    read in the same scan as the others' (ledger.recorded_for), None once a recording changed it."""
    if invocation_id not in _recovered_invocations:
        compact_tables(spark, transactions)
        ledger.forget(transactions)
    every = lock.must_check_every_table()
    # a table another dbt thread is committing to outside its turn is that thread's to record
    tables = sorted((lock.unrecorded | (set(history_tables) if every else set())) - skip - lock.writing)
    states = ledger.recorded_for(spark, transactions, [*tables, then])
    recovered: list[tuple[str, ledger.Txn]] = []
    for table in tables:
        records.withdraw(transactions, table)
        if spark.catalog.tableExists(table.replace("`", "")):
            # the last id read before another table's recovery recorded more is stale: read again
            txns = ledger.recover(spark, transactions, table, uuid_sql, None if recovered else states[table])[1]
            recovered += [(table, t) for t in txns]
        lock.unrecorded.discard(table)
    _recovered_invocations.add(invocation_id)
    if every:
        lock.checked_every_table()
    _note_recovered(invocation_id, transactions, recovered)
    return recovered, None if recovered else states[then]


def _staged_batches(spark: SparkSession, staged: str, first_key: str) -> list[Batch]:
    """The staged batches in batch order: one small query over the staged rows, which are in
    memory (no Spark job when staging found nothing pending)."""
    query = spark.sql(
        f"""
        select
            s.`_lh_ordinal` as ordinal,
            max_by(s.`_lh_batch_id`, s.`_lh_kind` = 'batch') as batch_id,
            max(s.`_lh_sequence`) as sequence,
            max(s.`_lh_source_table`) as source_table,
            max_by(s.`_lh_author`, s.`_lh_kind` = 'batch') as author,
            max_by(s.`_lh_app_id`, s.`_lh_kind` = 'batch') as app_id,
            max_by(s.`_lh_commit_message`, s.`_lh_kind` = 'batch') as commit_message,
            max_by(s.`_lh_commit_json`, s.`_lh_kind` = 'batch') as commit_json,
            max_by(s.`_lh_schema_changes`, s.`_lh_kind` = 'batch') as recorded_schema_changes,
            max_by(s.`_lh_deleted_column`, s.`_lh_kind` = 'batch') as deleted_column,
            max_by(s.`_lh_sync`, s.`_lh_kind` = 'batch') as sync,
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
    )
    # A row per batch, aggregated where the rows are first: one reduce partition holds them, at any size.
    with session_conf(spark, SMALL_BATCH_SETTINGS):
        rows = query.collect()
    return [
        Batch(
            ordinal=r.ordinal,
            batch_id=r.batch_id,
            sequence=r.sequence,
            source_table=r.source_table,
            author=r.author,
            app_id=r.app_id,
            commit_message=r.commit_message,
            commit_json=r.commit_json,
            truncate=r.truncate,
            schema_changes=tuple((c.row, c.op, c.column) for c in r.schema_changes),
            rows_in=r.rows_in,
            key_range=(r.key_lo, r.key_hi),
            deleted_column=r.deleted_column,
            sync=SyncOf.of(r.sync and r.sync.asDict(), r.author, r.app_id),
            recorded_schema_changes=r.recorded_schema_changes,
        )
        for r in rows
    ]


def _pending(target: str, staged_batches: list[Batch], recovered: Recovered) -> list[Batch]:
    """The staged batches but those just `recovered` for the history table `target`."""
    batches = [b for b in staged_batches if (target, b.source_table, b.batch_id) not in recovered]
    if batches and [b.ordinal for b in batches] != list(range(batches[0].ordinal, batches[-1].ordinal + 1)):
        raise HistoryError(
            "the history table holds some staged batches but not the ones before them: "
            + ", ".join(b.batch_id for b in batches)
        )
    return batches


def _not_applied_meanwhile(target: str, pending: list[Batch], state: ledger.Recorded) -> list[Batch]:
    """The pending batches but those another run applied to `target` since this run staged them
    (two invocations that apply one table at once: the second waits for the writer lock, and by
    then the record says the first applied them). A table's batches apply in sequence order, so a
    staged batch whose sequence is not after the last recorded one is on record already."""
    if state.last_sequence is None:
        return pending
    done = [b for b in pending if b.sequence is not None and b.sequence <= state.last_sequence]
    if done:
        lock.say(
            f"{target}: batch(es) {', '.join(str(b.batch_id) for b in done)} of {done[0].source_table} were applied by"
            " another run while this one waited for the writer lock; skipped."
        )
    return pending[len(done) :]  # in sequence order: those applied meanwhile come first


def _dropped_message(target: str, state: ledger.Recorded) -> str:
    return (
        f"{target} does not exist, but the transactions table records transactions of it up to"
        f" {state.history_last_id} (Delta version {state.delta_version}): the table was dropped, and creating it"
        " anew would leave that history behind while its batches count as applied. Nothing was changed."
        " Restore the table (its Delta folder still holds it until it is vacuumed or deleted: register it again"
        " with CREATE TABLE ... USING DELTA LOCATION), or, to start a new history on purpose, give the model a"
        " new alias."
    )


def _unconfigured_deleted_column(pending: list[Batch], layout: Layout) -> Batch | None:
    """The first batch whose manifest names, as its deleted column, a column of the table that is
    not the model's `deleted_column`. Rules 8 and 11 would set that column on the rows the batch
    closes; the product sets only the column the model configures, so that a manifest (untrusted
    input) cannot turn any column of the table into a delete flag. A named column the table lacks
    is ignored, as the spec says."""
    columns = {c.lower() for c in layout.data}
    configured = (layout.deleted_column or "").lower()
    for batch in pending:
        named = (batch.deleted_column or "").lower()
        if named in columns and named != configured:
            return batch
    return None


def _deleted_column_message(batch: Batch, layout: Layout) -> str:
    configured = layout.deleted_column
    model = f"the model's deleted_column is {configured}" if configured else "the model configures no deleted_column"
    column = next(c for c in layout.data if c.lower() == (batch.deleted_column or "").lower())
    return (
        f"batch {batch.batch_id} of {batch.source_table} names {batch.deleted_column} as its deleted column,"
        f" but {model}: set deleted_column='{column}' in the model's config to have the rows it"
        " closes marked deleted (spec rules 8 and 11), or land the batch without it."
        " This batch and the ones after it were not applied; the ones before it were."
    )


def _transactions_of(
    spark: SparkSession,
    transactions: str,
    target: str,
    applicable: list[Batch],
    state: ledger.Recorded,
    invocation_id: str,
) -> tuple[list[tuple[int, str, str | None]], ledger.Recorded]:
    """Each batch's transaction: (id, start, sync). A batch of a sync takes the sync's, reserved
    with those of every sync the run has pending (syncs.py); a batch of its own the next id.
    Returns them, and `state` with the reserved ids counted. A table's ids only increase: a batch
    whose sync's id is below one the table already has is refused before anything is applied."""
    if applicable:
        _refuse_during_stopped_revert(spark, transactions, target, state)
    wanted = {b.sync.id: b.sync for b in applicable if b.sync is not None}
    reserved: dict[str, syncs.Reserved] = {}
    if wanted:
        run = run_reads.pending_syncs(invocation_id, transactions)
        reserved, state = syncs.reserve(spark, transactions, {**run, **wanted}.values(), state)
    own = [b for b in applicable if b.sync is None]
    times = iter(ledger.transaction_times(state.last_started, len(own)) if own else ())
    next_id = state.last_id
    plan: list[tuple[int, str, str | None]] = []
    for batch in applicable:
        if batch.sync is None:
            next_id += 1
            plan.append((next_id, next(times), None))
        else:
            sync = reserved[batch.sync.id]
            if sync.abandoned:
                raise HistoryError(sync.abandoned_message(f"batch {batch.batch_id} of {batch.source_table}"))
            plan.append((sync.txn_id, sync.started_at, batch.sync.id))
    before: tuple[int, Batch | None] = (state.history_last_id, None)
    for batch, (txn_id, _, _) in zip(applicable, plan):
        if txn_id <= before[0]:
            raise HistoryError(_out_of_order_message(target, batch, txn_id, *before))
        before = (txn_id, batch)
    return plan, state


def _refuse_during_stopped_revert(spark: SparkSession, transactions: str, target: str, state: ledger.Recorded) -> None:
    """A revert or undo reserved its transaction for `target` and was stopped before the table
    recorded it: another transaction first would put the table's ids out of order."""
    if state.operation_reserved > state.history_last_id:
        stopped = syncs.stopped_operation_message(spark, transactions, state.operation_reserved)
        raise HistoryError(f"nothing was applied to {target}: {stopped}")


def _out_of_order_message(target: str, batch: Batch, txn_id: int, last_id: int, last: Batch | None) -> str:
    sync = batch.sync.id if batch.sync else "?"
    after = f"batch {last.batch_id}, which comes before it," if last else f"{target}"
    return (
        f"batch {batch.batch_id} of {batch.source_table} belongs to sync {sync}, whose transaction {txn_id} was"
        f" reserved before transaction {last_id}, which {after} took: a table's transactions only go forward."
        " A table's batches without a sync must not come before a sync that other tables have applied: apply"
        " them before landing the sync, or land them in syncs too. Nothing of this run was applied to this table."
    )


# --- one group ---------------------------------------------------------------------------------------


def _changes_of(
    spark: SparkSession, target: str, staged: str, layout: Layout, versions: Versioning, group: list[Batch]
) -> tuple[int, Changes]:
    """How many batches of `group`'s head form one group, and their changes: a batch whose
    version clashes with a stored row is refused (when it is the first) or ends the group before
    it, as does one that puts a version below a row still there."""
    n = len(group)
    while True:
        changes = compute_changes(spark, target, staged, layout, versions, group[:n])
        if changes.clash == 1:
            raise HistoryError(clash_message(changes.frame, group[0], layout))
        if changes.clash is not None and changes.clash <= n:
            n = changes.clash - 1
        elif changes.interleave is not None and changes.interleave < n:
            n = changes.interleave
        else:
            return n, changes


def _apply_group(
    spark: SparkSession,
    target: str,
    staged: str,
    transactions: str,
    layout: Layout,
    versions: Versioning,
    uuid_sql: str,
    group: list[Batch],
    plan: list[tuple[int, str, str | None]],
    state: ledger.Recorded,
    outcome: Outcome,
    computed: tuple[list[Batch], Changes] | None = None,
    outside_turn: bool = False,
) -> tuple[int, ledger.Recorded]:
    """Apply the longest head of `group` that forms one group (`computed`: its batches and changes,
    when they are known already), each batch as its transaction of `plan` (_transactions_of);
    return how many batches it took and the transactions table's state after it. `outside_turn`:
    every id of the run's plan is a sync's, so the commit lets other dbt threads take their turn."""
    if computed is not None:
        n, changes = len(computed[0]), computed[1]
    else:
        n, changes = _changes_of(spark, target, staged, layout, versions, group)
    _reached("computed")
    txns = [
        ledger.Txn(
            txn_id=txn_id,
            batch_id=b.batch_id,
            sequence=b.sequence,
            source_table=b.source_table,
            author=b.author,
            app_id=b.app_id,
            commit_message=b.commit_message,
            commit_json=b.commit_json,
            schema_changes=b.recorded_schema_changes,
            started_at=started_at,
            rows_in=b.rows_in,
            versions_opened=changes.opened.get(i, 0),
            versions_closed=changes.closed.get(i, 0),
            rows_overlap_deleted=changes.gone.get(i, 0),
            sync_id=sync_id,
        )
        for i, (b, (txn_id, started_at, sync_id)) in enumerate(zip(group[:n], plan), start=1)
    ]
    version = version_sql(versions, txns)
    # The commit carries the group's transactions; a group that changes nothing (a re-delivered
    # batch) still commits, so that its transactions are on record in the table too.
    metadata = session_conf(spark, {ledger.USER_METADATA: ledger.commit_metadata(txns), SKIP_EMPTY_COMMITS: "false"})
    lock.check_held()
    with records.committing([target]):
        if outside_turn:
            # Ids a sync reserved are no other table's to take: the other dbt threads go on
            # meanwhile, and the first to take the turn next records the commits made by then.
            with lock.writing_outside_turn(target):
                with metadata:
                    write_group(spark, target, layout, versions, version, changes, group[:n])
                    commit = own_commit(spark, target, txns)
                waiting = records.wait(transactions, target, commit)
            records.record_waiting(spark, transactions, waiting, uuid_sql, stop=_reached)
        else:
            with metadata:
                write_group(spark, target, layout, versions, version, changes, group[:n])
                commit = own_commit(spark, target, txns)
            records.record_commits(spark, transactions, [(target, commit)], uuid_sql, stop=_reached)
    _reached("recorded")
    outcome.batches += n
    outcome.groups += 1
    outcome.transactions += [t.txn_id for t in txns]
    last = txns[-1]
    started = dt.datetime.fromisoformat(last.started_at)
    last_started = started if state.last_started is None else max(state.last_started, started)
    return n, replace(
        state,
        last_id=max(state.last_id, last.txn_id),
        last_started=last_started,
        history_last_id=last.txn_id,
        delta_version=commit.version,
        last_sequence=ledger.last_of(state.last_sequence, *(t.sequence for t in txns)),
    )
