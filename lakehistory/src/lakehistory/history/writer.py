"""The writer of a project's transactions table, as one object the door builds and hands down.

Everything that takes a transaction id (a history apply, a capture or cleanup, a revert, an
undo, a sync given up, a tag) writes as the one writer: it takes the writer lock (lock.py), then
records what a stopped run left unrecorded (the recovery here) before it reads the last id, and
records its own transaction before it lets go (records.py). The writer carries what all of them
need to do so: the transactions table, its lock and how long to wait for it, the rule of a
transaction's uuid, the project's history tables (a recovery may have to check each of them), and
the dbt invocation it writes for, whose state (invocation.py) remembers what its recoveries did.

What the process knows as the writer outlives an invocation and stays with the hold of the lock:
the hold itself and the tables with a commit left unrecorded (lock.py), the transactions table's
last ids read under the hold (ledger.py), the syncs reserved under it (syncs.py) and the commits
waiting for their record (records.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from lakehistory.history import ledger, lock, records
from lakehistory.history.transactions import compact_tables
from lakehistory.invocation import Invocation

# A batch a recovery recorded: (history table, source table, batch id).
Recovered = set[tuple[str, str | None, str | None]]


@dataclass
class Recoveries:
    """An invocation's part (invocation.py), per transactions table: whether its first recovery
    read the table afresh, the batches its recoveries recorded, and what the table held for every
    history table at its first idle check."""

    read_afresh: set[str] = field(default_factory=set)
    recovered: dict[str, Recovered] = field(default_factory=dict)
    recorded_at_start: dict[str, dict[str, ledger.Recorded]] = field(default_factory=dict)
    # the first idle check's threads wait for its read rather than repeat it
    reading: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class Writer:
    """The writer of `transactions` for one dbt invocation (the module's docstring says what it does)."""

    transactions: str
    lock: str
    uuid_sql: str
    history_tables: tuple[str, ...] = ()
    invocation: Invocation = field(default_factory=lambda: Invocation(""))
    wait_seconds: float = 600

    def holding(self, spark: SparkSession) -> AbstractContextManager[None]:
        """The writer lock, taken (waiting up to `wait_seconds`) for the block."""
        return lock.holding(spark, self.lock, self.wait_seconds)

    def hold(self) -> int | None:
        """Which hold of the writer lock this process has now (lock.hold_of), None: none."""
        return lock.hold_of(self.lock)

    # --- records ----------------------------------------------------------------------------------

    def record(
        self, spark: SparkSession, commits: Sequence[tuple[str, ledger.Commit]], stop: Callable[[str], None]
    ) -> None:
        """Under the lock: record the transactions of `commits` (history table, commit) in one
        statement (records.record_commits)."""
        records.record_commits(spark, self.transactions, commits, self.uuid_sql, stop=stop)

    def record_waiting(self, spark: SparkSession, mine: records.Waiting, stop: Callable[[str], None]) -> None:
        """Under the lock: record `mine`, a commit made outside the turn, with every other one
        waiting by then (records.record_waiting)."""
        records.record_waiting(spark, self.transactions, mine, self.uuid_sql, stop=stop)

    # --- recovery ---------------------------------------------------------------------------------

    def recover(
        self, spark: SparkSession, target: str, latest: Any = None, clean: bool = False
    ) -> tuple[ledger.Recorded, Recovered]:
        """Under the lock: record unrecorded commits, of `target` and of the other tables
        (`_recover_others`). Returns the transactions table's state for `target` (checked last,
        so that its last id counts every other table's) and the batches just recorded.
        `latest`: `target`'s last commit, when the caller knows it is still the last; `clean`:
        the caller found `target` clean (known_clean) under this same hold: if it still is, its
        commits are not read."""
        recovered, state = self._recover_others(spark, {target}, target)
        if clean and self.known_clean(target) is not None:
            state = state or ledger.recorded(spark, self.transactions, target)  # known: no read
            return state, {(table, *batch) for table, t in recovered for batch in t.batches()}
        lock.unrecorded_of(self.lock).discard(target)
        records.withdraw(self.transactions, target)
        state, txns = ledger.recover(spark, self.transactions, target, self.uuid_sql, state, latest)
        mine = [(target, t) for t in txns]
        self._note_recovered(mine)
        return state, {(table, *batch) for table, t in recovered + mine for batch in t.batches()}

    def known_clean(self, target: str) -> ledger.Recorded | None:
        """What the transactions table holds for `target`, when this process knows it without a
        read and knows that `target` has no commit the table lacks: its hold of the writer lock
        has lasted since this invocation read the transactions table afresh (no other process
        wrote since), and no commit of `target` it made waits for its record. Else None."""
        hold = self.hold()
        if hold is None or self.transactions not in self.invocation.part(Recoveries).read_afresh:
            return None
        if target in lock.unrecorded_of(self.lock) | lock.unrecorded_of("") | lock.writing:
            return None
        return ledger.known_state(self.transactions, (self.lock, hold), target)

    def recover_every(self, spark: SparkSession, then: str) -> ledger.Recorded:
        """Under the lock, for a transaction of no history table's own commit (a capture, a
        cleanup, a sync given up): record what any history table committed and the transactions
        table lacks (_recover_others); returns what the transactions table then holds for `then`."""
        _, state = self._recover_others(spark, set(), then)
        return state or ledger.recorded(spark, self.transactions, then)

    def recovered_batches(self) -> Recovered:
        """The batches this invocation's recoveries recorded. A model may have staged one of them
        from what the invocation read at its start (landing/run_reads.py), before another model's
        recovery recorded it: it is not applied."""
        with self.invocation.mutex:
            return set(self.invocation.part(Recoveries).recovered.get(self.transactions, ()))

    def recorded_at_start(self, spark: SparkSession, target: str) -> ledger.Recorded:
        """What the transactions table holds for `target`, as the invocation's first idle check
        read it for every history table in one scan. The table's own commits come from its own
        model only, which is the caller; a record made since (another model's recovery) can only
        make its commits look unrecorded, and the run then checks them again under the lock."""
        done = self.invocation.part(Recoveries)
        with done.reading:
            known = done.recorded_at_start.get(self.transactions, {})
            if not self.invocation.kept or target not in known:
                tables = sorted({*self.history_tables, target})
                known = ledger.recorded_for(spark, self.transactions, tables)
                done.recorded_at_start[self.transactions] = known
            return known.pop(target)

    def _recover_others(
        self, spark: SparkSession, skip: set[str], then: str
    ) -> tuple[list[tuple[str, ledger.Txn]], ledger.Recorded | None]:
        """Record unrecorded commits of the tables whose record this process could not write, and
        of every history table once per hold of the writer lock whose last holder may have left
        one (lock.must_check_every_table), but those in `skip`. Returns the transactions
        recorded, and what the transactions table holds for the table `then` the caller checks
        next: read in the same scan as the others' (ledger.recorded_for), None once a recording
        changed it. An invocation's first recovery reads the transactions table afresh (it may
        have been changed by hand since the process last read it) and compacts it."""
        done = self.invocation.part(Recoveries)
        if self.transactions not in done.read_afresh:
            compact_tables(spark, self.transactions)
            ledger.forget(self.transactions)
        every = lock.must_check_every_table()
        # a table another dbt thread is committing to outside its turn is that thread's to record
        # a commit left unrecorded outside any hold ("") is this lakehouse's if its table is
        left = lock.unrecorded_of(self.lock) | (lock.unrecorded_of("") & set(self.history_tables))
        tables = sorted((left | (set(self.history_tables) if every else set())) - skip - lock.writing)
        states = ledger.recorded_for(spark, self.transactions, [*tables, then])
        recovered: list[tuple[str, ledger.Txn]] = []
        for table in tables:
            records.withdraw(self.transactions, table)
            if spark.catalog.tableExists(table.replace("`", "")):
                # the last id read before another table's recovery recorded more is stale: read again
                state = None if recovered else states[table]
                txns = ledger.recover(spark, self.transactions, table, self.uuid_sql, state)[1]
                recovered += [(table, t) for t in txns]
            lock.unrecorded_of(self.lock).discard(table)
            lock.unrecorded_of("").discard(table)
        done.read_afresh.add(self.transactions)
        if every:
            lock.checked_every_table()
        self._note_recovered(recovered)
        return recovered, None if recovered else states[then]

    def _note_recovered(self, txns: list[tuple[str, ledger.Txn]]) -> None:
        with self.invocation.mutex:
            noted = self.invocation.part(Recoveries).recovered.setdefault(self.transactions, set())
            noted.update((table, *batch) for table, t in txns for batch in t.batches())
