"""Which transaction each pending batch of a history table becomes.

The staged batches a run applies are those the history table's own record (and a recovery just
now) does not hold, in order; each then takes its transaction: a batch of a sync the id reserved
for the sync (syncs.py, reserved here if no other table of it has), a batch of its own the next
id. A table's ids only go forward, and none is taken while a stopped revert holds the table.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, syncs
from lakehistory.history.group import Batch
from lakehistory.history.writer import Recovered, Writer
from lakehistory.invocation import say
from lakehistory.landing import run_reads


def pending(target: str, staged_batches: list[Batch], recovered: Recovered) -> list[Batch]:
    """The staged batches but those just `recovered` for the history table `target`."""
    batches = [b for b in staged_batches if (target, b.source_table, b.batch_id) not in recovered]
    if batches and [b.ordinal for b in batches] != list(range(batches[0].ordinal, batches[-1].ordinal + 1)):
        raise HistoryError(
            "the history table holds some staged batches but not the ones before them: "
            + ", ".join(b.batch_id for b in batches)
        )
    return batches


def not_applied_meanwhile(target: str, pending: list[Batch], state: ledger.Recorded) -> list[Batch]:
    """The pending batches but those another run applied to `target` since this run staged them
    (two invocations that apply one table at once: the second waits for the writer lock, and by
    then the record says the first applied them). A table's batches apply in sequence order, so a
    staged batch whose sequence is not after the last recorded one is on record already."""
    if state.last_sequence is None:
        return pending
    done = [
        b for b in pending if b.operation == "batch" and b.sequence is not None and b.sequence <= state.last_sequence
    ]
    if done:
        say(
            f"{target}: batch(es) {', '.join(str(b.batch_id) for b in done)} of {done[0].source_table} were applied by"
            " another run while this one waited for the writer lock; skipped."
        )
    return [b for b in pending if b not in done]


def transactions_of(
    spark: SparkSession, writer: Writer, target: str, applicable: list[Batch], state: ledger.Recorded
) -> tuple[list[tuple[int, str, str | None]], ledger.Recorded]:
    """Each batch's transaction: (id, start, sync). A batch of a sync takes the sync's, reserved
    with those of every sync the run has pending (syncs.py); a batch of its own the next id.
    Returns them, and `state` with the reserved ids counted. A table's ids only increase: a batch
    whose sync's id is below one the table already has is refused before anything is applied."""
    if applicable:
        refuse_during_stopped_revert(spark, writer.transactions, target, state)
    wanted = {b.sync.id: b.sync for b in applicable if b.sync is not None}
    reserved: dict[str, syncs.Reserved] = {}
    if wanted:
        run = run_reads.pending_syncs(writer.invocation, writer.transactions)
        reserved, state = syncs.reserve(spark, writer.transactions, {**run, **wanted}.values(), state)
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


def refuse_during_stopped_revert(spark: SparkSession, transactions: str, target: str, state: ledger.Recorded) -> None:
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
