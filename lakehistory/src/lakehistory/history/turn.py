"""The writer's turn: the one protocol every operation that writes a lakehouse goes through.

    with turn.taking(spark, writer, "revert", request) as t:   # the lock held, a session of its own
        states = t.recover(targets)                             # what a stopped run left, recorded
        stopped = t.stopped()                                   # this request's own stopped reservation
        reservation = stopped or t.reserve(targets, author, states[targets[0]])
        t.commit(todo, lambda table: merge(table, reservation))  # each commit, then one record

The order is the protocol, and the reason each step is where it is:

1. **hold** the writer lock (lock.py), in a session of the turn's own (session.py): no other
   process and no other dbt thread writes the transactions table meanwhile;
2. **recover**: record what a stopped run left unrecorded before reading any last id
   (writer.py), so no id is taken twice and no batch applied twice;
3. **find this request's stopped reservation** (syncs.operations): asked again, a stopped
   operation completes the tables that have not recorded it; another's stopped reservation is
   refused, naming how to complete it or give it up (operations/abandon.py);
4. **refuse** what the operation cannot do (the caller's checks), before anything is reserved;
5. **reserve** the next id (syncs.reserve_operation): from here, a stop leaves a reservation its
   tables wait for, which asking again completes;
6. **commit** each table, marked unrecorded until the record (records.committing), then
   **record** every commit in one statement.

`STOP_POINTS` names the points between those steps where a kill leaves a different state. Each
operation passes `reached(operation, point)` at each point it has, in this order; a test replaces
`reached` to stop any operation at any of its points (tests/history/test_stops.py, and the
generated sequences of test_operation_sequences.py). The history strategy's apply takes the turn
with the session it computed its first changes in, and passes the two points more it has (the
columns it added, the rows it computed) through `Turn.reached`, in the same order.

What the process knows as the writer (the hold, the tables with a commit unrecorded, the last
ids read) belongs to the hold of the lock (lock.py, ledger.py), so a turn of one lakehouse never
records into another's log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, records, syncs
from lakehistory.history.session import classic_session, own_session
from lakehistory.history.writer import Recovered, Writer

STOP_POINTS = ("columns_added", "recovered", "reserved", "computed", "committed", "recorded")
# the points of an operation that reserves its id (a revert, undo, rewind, branch publish), and
# those after its reservation, where a stop leaves its tables waiting for it
RESERVED_STOP_POINTS = ("reserved", "committed", "recorded")
OPERATION_STOP_POINTS = ("recovered", *RESERVED_STOP_POINTS)


def reached(operation: str, point: str) -> None:
    """An operation reached a named point of its turn (STOP_POINTS); nothing happens here."""


@dataclass
class Turn:
    """One operation's turn as the writer: `spark` is the turn's own session."""

    spark: SparkSession
    writer: Writer
    operation: str
    request: str | None = None

    def recover(self, targets: Sequence[str]) -> dict[str, ledger.Recorded]:
        """Record what a stopped run left of `targets` and every other table (writer.recover);
        returns what the transactions table then holds for each target."""
        for target in targets:
            self.writer.recover(self.spark, target)
        states = ledger.recorded_for(self.spark, self.writer.transactions, list(targets))
        reached(self.operation, "recovered")
        return states

    def recover_applied(
        self, target: str, latest: Any = None, clean: bool = False
    ) -> tuple[ledger.Recorded, Recovered]:
        """For the apply of `target`'s batches: record what a stopped run left (writer.recover;
        `latest`: the table's last commit, when the caller knows it is still the last; `clean`:
        the caller found the table clean in this hold); what the transactions table then holds
        for it, and the batches recorded by now in this invocation."""
        state, recovered = self.writer.recover(self.spark, target, latest, clean)
        reached(self.operation, "recovered")
        return state, recovered | self.writer.recovered_batches()

    def reached(self, point: str) -> None:
        """The operation reached `point` of STOP_POINTS, of the steps it runs itself."""
        reached(self.operation, point)

    def recover_every(self, then: str) -> ledger.Recorded:
        """For a transaction of no history table's own commit: what any table left, recorded."""
        return self.writer.recover_every(self.spark, then)

    def made_anew(self, transactions: str) -> None:
        """`transactions` is a table this operation made under a name this process may know (a
        branch's ledger, made again): what the process kept of the old table goes."""
        ledger.forget(transactions)

    def operations(self) -> list[syncs.Operation]:
        """The stopped reservations, and those of this request, in id order."""
        return syncs.operations(self.spark, self.writer.transactions, self.request)

    def stopped(self, found: list[syncs.Operation] | None = None) -> syncs.Operation | None:
        """This request's reservation some table has not recorded; another's is refused."""
        waiting = next((o for o in (self.operations() if found is None else found) if o.waiting), None)
        if waiting is not None and waiting.request != self.request:
            raise HistoryError(waiting.stopped_message())
        return waiting

    def reserve(self, targets: Sequence[str], author: str | None, state: ledger.Recorded) -> syncs.Operation:
        """The next id, reserved for `targets` (their tables wait for it from now on)."""
        assert self.request is not None, "an operation that reserves its id is asked as a request"
        who = author or self.spark.sql("select current_user()").collect()[0][0]
        reservation, _ = syncs.reserve_operation(
            self.spark, self.writer.transactions, self.operation, list(targets), who, self.request, state
        )
        reached(self.operation, "reserved")
        return reservation

    def commit_table(self, target: str, write: Callable[[], ledger.Commit], beside_others: bool) -> ledger.Commit:
        """Commit `target` (`write`: its one Delta commit) and record it; returns the commit. `beside_others`: its ids
        are a sync's, reserved already, no other table's to take: it commits outside the turn
        while the other dbt threads go on, waits a moment for the tables writing beside it, and
        the first to take the turn next records the commits made by then (records.py)."""
        transactions = self.writer.transactions
        lock.check_held()
        with records.committing([target]):
            if not beside_others:
                commit = write()
                self.writer.record(self.spark, [(target, commit)], stop=self.reached)
                return commit
            with lock.writing_outside_turn(target), records.writing(transactions, target) as mine:
                commit = write()
                records.wait(transactions, mine, commit, peers=classic_session(self.spark))
            self.writer.record_waiting(self.spark, mine, stop=self.reached)
            return commit

    def commit(self, targets: Sequence[str], each: Callable[[str], ledger.Commit]) -> None:
        """Commit each of `targets` (`each`: its one Delta commit), then record them all in one
        statement; a stop in between leaves them for the next writer to record."""
        commits = []
        with records.committing(list(targets)):
            for target in targets:
                commits.append((target, each(target)))
                reached(self.operation, "committed")
            self.writer.record(self.spark, commits, stop=lambda point: None)
        reached(self.operation, "recorded")


@contextmanager
def taking(
    spark: SparkSession,
    writer: Writer,
    operation: str,
    request: str | None = None,
    session: SparkSession | None = None,
) -> Iterator[Turn]:
    """The writer's turn for the block: the lock held, a session of the turn's own (`session`:
    the operation's own session, taken before the turn: the apply computes its first group's
    changes before it waits for the lock)."""
    if session is not None:
        with writer.holding(spark):
            yield Turn(session, writer, operation, request)
        return
    with writer.holding(spark), own_session(spark) as own:
        yield Turn(own, writer, operation, request)
