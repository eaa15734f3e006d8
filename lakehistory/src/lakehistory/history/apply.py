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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import SparkSession

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, plan, turn
from lakehistory.history.group import (
    SKIP_EMPTY_COMMITS,
    Batch,
    Changes,
    append_only_message,
    clash_message,
    compute_changes,
    own_commit,
    version_sql,
    write_group,
)
from lakehistory.history.layout import Layout
from lakehistory.history.session import own_session, session_conf
from lakehistory.history.staged import settings_for, staged_batches
from lakehistory.history.table import (
    Versioning,
    add_new_columns,
    columns_to_change,
    create_table,
    layout_of,
)
from lakehistory.history.writer import Writer

# An apply passes every point of the writer's turn (turn.STOP_POINTS); these once per group.
GROUP_STOP_POINTS = ("computed", "committed", "recorded")


@dataclass
class Outcome:
    batches: int = 0
    groups: int = 0
    transactions: list[int] = field(default_factory=list)


def apply_pending(
    spark: SparkSession,
    writer: Writer,
    target: str,
    staged: str,
    keys: Sequence[str],
    deleted_column: str | None,
    versioning: Versioning,
    exists: bool,
    max_batches_per_commit: int | None = None,
) -> dict[str, Any]:
    """For the strategy macro (lakehistory.door): apply the pending batches in `staged` (the model's
    rows, a view of lakehistory.landing_batches) to the history table `target`, at most
    `max_batches_per_commit` batches per group (None: as many as the rules allow), as `writer`."""

    # The statements run in a copy of dbt's session (session.py); the writer lock is this process's.
    with own_session(spark) as own, contextlib.ExitStack() as sized:
        layout = layout_of(own, staged, keys, deleted_column, table=target)
        pending_batches = staged_batches(own, staged, layout.keys[0])
        sized.enter_context(session_conf(own, settings_for(pending_batches)))
        ready = exists and not any(columns_to_change(own, target, layout))
        # Staging found every landed batch recorded. Unless the table holds a commit the ledger
        # lacks (a stopped revert, capture or cleanup), it is left as it is, checked as every run
        # checks it, without waiting for the writer lock.
        if ready and not pending_batches:
            state = writer.recorded_at_start(own, target)
            if not ledger.unrecorded_commits(own, target, state):
                return {"batches": 0, "groups": 0, "transactions": []}
        # The first group's changes read only this table and its staged rows, which no other
        # writer changes: they are computed before the writer lock, while other models of the run
        # write. Under the lock they stand unless a recovery changed what is pending.
        early = None
        if ready:
            early = _early_changes(
                own, writer, target, staged, layout, versioning, pending_batches, max_batches_per_commit
            )
        with turn.taking(spark, writer, "apply", session=own) as my:
            if not exists:
                create_table(own, target, layout, versioning)
            else:
                add_new_columns(own, target, layout)
            my.reached("columns_added")
            outcome = Outcome()
            try:
                continuous = early if early is not None and early.hold == writer.hold() else None
                latest = continuous.latest if continuous is not None else None
                clean = continuous is not None and continuous.clean
                state, recovered = my.recover_applied(target, latest, clean=clean)
                if not exists and state.history_last_id:
                    raise HistoryError(_dropped_message(target, state))
                pending = plan.not_applied_meanwhile(target, plan.pending(target, pending_batches, recovered), state)
                refused = _unconfigured_deleted_column(pending, layout)
                applicable = pending[: pending.index(refused)] if refused else pending
                planned, state = plan.transactions_of(own, writer, target, applicable, state)
                for txn_id, started_at, _ in planned:
                    versioning.refuse_past_open_end(txn_id, started_at, target)
                my.reached("reserved")
                at = 0
                while at < len(applicable):
                    group = applicable[at : _group_end(applicable, at, max_batches_per_commit)]
                    computed = early.of(group, state) if early is not None and at == 0 else None
                    taken, state = _apply_group(
                        my,
                        target,
                        staged,
                        layout,
                        versioning,
                        group,
                        planned[at : at + len(group)],
                        state,
                        outcome,
                        computed,
                        outside_turn=all(sync_id is not None for _, _, sync_id in planned),
                    )
                    at += taken
                if refused:
                    raise HistoryError(_deleted_column_message(refused, layout))
            except Exception:
                if not exists:
                    _drop_if_never_written(own, target)
                raise
            return {"batches": outcome.batches, "groups": outcome.groups, "transactions": outcome.transactions}


def _group_end(applicable: list[Batch], at: int, max_batches_per_commit: int | None) -> int:
    """Where the group that starts at `applicable[at]` ends at the latest: before the next batch
    that rewrites stored rows, after `max_batches_per_commit` batches."""
    end = next((i for i in range(at + 1, len(applicable)) if applicable[i].rewrites), len(applicable))
    return min(end, at + int(max_batches_per_commit)) if max_batches_per_commit else end


@dataclass(frozen=True)
class _Early:
    """A first group's changes computed before the writer lock, against the table at `version`,
    its last commit then (`latest`, a row of its `describe history`; None when the writer knew
    the version without a read: `clean`), while this process held the lock as `hold`
    (lock.hold_of; None: it did not). A commit of the table since then takes the lock: if the
    hold is the same under it, `latest` is still the table's last commit."""

    batches: list[Batch]
    changes: Changes
    version: int
    latest: Any = None
    hold: int | None = None
    clean: bool = False  # the writer knew the table and its version without a read (writer.known_clean)

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
    writer: Writer,
    target: str,
    staged: str,
    layout: Layout,
    versioning: Versioning,
    batches: list[Batch],
    max_batches_per_commit: int | None,
) -> _Early | None:
    """The first group's batches and changes of a table that has every column, computed before
    the writer lock; None where the batches need the lock's checks first (a clash, a refused
    deleted column: a recovery under the lock may yet drop the batch at fault)."""
    if not batches or _unconfigured_deleted_column(batches, layout) is not None:
        return None
    hold = writer.hold()  # before the read: a take after it is a new hold
    known = writer.known_clean(target)
    if known is not None and known.delta_version is not None:
        # the table's last commit is the one the transactions table records last: no statement
        latest, version = None, known.delta_version
    else:
        latest = spark.sql(f"describe history {target} limit 1").collect()[0]
        version = int(latest.version)
    try:
        group = batches[: _group_end(batches, 0, max_batches_per_commit)]
        n, changes = _changes_of(spark, target, staged, layout, versioning, group)
    except HistoryError:
        return None
    return _Early(group[:n], changes, version, latest, hold, clean=latest is None)


def _drop_if_never_written(spark: SparkSession, target: str) -> None:
    """A first run that failed before its first commit leaves no empty table behind: the next run
    creates it again, with the columns the rows have then."""
    if spark.sql(f"describe history {target} limit 1").collect()[0].version == 0:
        spark.sql(f"drop table if exists {target}")


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
        # Atoti's append-only case takes no update and no delete: the first batch that would
        # change a row an earlier batch wrote is refused, after the ones before it
        changing = min(changes.closed, default=None) if versions.append_only else None
        if changing == 1:
            raise HistoryError(append_only_message(changes.frame, group[0], layout))
        if changes.clash is not None and changes.clash <= n:
            n = changes.clash - 1
        elif changing is not None:
            n = changing - 1
        elif changes.interleave is not None and changes.interleave < n:
            n = changes.interleave
        else:
            return n, changes


def _apply_group(
    my: turn.Turn,
    target: str,
    staged: str,
    layout: Layout,
    versions: Versioning,
    group: list[Batch],
    planned: list[tuple[int, str, str | None]],
    state: ledger.Recorded,
    outcome: Outcome,
    computed: tuple[list[Batch], Changes] | None = None,
    outside_turn: bool = False,
) -> tuple[int, ledger.Recorded]:
    """Apply the longest head of `group` that forms one group (`computed`: its batches and changes,
    when they are known already), each batch as its transaction of `planned` (plan.transactions_of);
    return how many batches it took and the transactions table's state after it. `outside_turn`:
    every id the run planned is a sync's, so the commit lets other dbt threads take their turn."""
    spark = my.spark
    if computed is not None:
        n, changes = len(computed[0]), computed[1]
    else:
        n, changes = _changes_of(spark, target, staged, layout, versions, group)
    my.reached("computed")
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
            operation=b.operation,
        )
        for i, (b, (txn_id, started_at, sync_id)) in enumerate(zip(group[:n], planned), start=1)
    ]
    version = version_sql(versions, txns)
    # The commit carries the group's transactions; a group that changes nothing (a re-delivered
    # batch) still commits, so that its transactions are on record in the table too.
    metadata = session_conf(spark, {ledger.USER_METADATA: ledger.commit_metadata(txns), SKIP_EMPTY_COMMITS: "false"})

    def write() -> ledger.Commit:
        with metadata:
            write_group(spark, target, layout, versions, version, changes, group[:n])
            return own_commit(spark, target, txns)

    commit = my.commit_table(target, write, beside_others=outside_turn)
    my.reached("recorded")
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
        last_sequence=ledger.last_of(state.last_sequence, *(t.sequence for t in txns if t.operation == "batch")),
    )
