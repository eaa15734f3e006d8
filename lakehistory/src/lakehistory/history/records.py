"""Records of the commits a sync's tables make side by side.

A sync's ids are reserved before any of its tables is written, so each table commits outside
the writer's turn (lock.writing_outside_turn) while the other dbt threads go on; its record then
waits for the turn. A table that has committed waits a moment for the tables that were writing
then, so that their commits wait too; the thread that takes the turn first records every commit
that waits by then, in one statement of the transactions table, and the others find theirs done:
a sync of many tables costs a few records, not one a table. A node's rows are still recorded
when the node ends, so the models after it in the same run read them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from lakehistory.history import ledger, lock


@contextlib.contextmanager
def committing(targets: Sequence[str]) -> Iterator[None]:
    """From before a commit of the history tables `targets` until its transactions are recorded,
    the tables count as holding a commit the transactions table lacks (lock.unrecorded_of): whatever
    stops the block in between (an error raised after Delta committed, Ctrl-C while a dbt thread
    sits here, a lost Connect stream) leaves them so, the writer lock is let go as not clean, and
    the next writer records the commit before it takes an id."""
    lock.mark_unrecorded(targets)
    yield
    lock.mark_unrecorded(targets, recorded=True)


def record_commits(
    spark: SparkSession,
    transactions: str,
    commits: Sequence[tuple[str, ledger.Commit]],
    uuid_sql: str,
    stop: Callable[[str], None],
) -> None:
    """Record the transactions the `commits` (history table, commit) carry, in one statement,
    after the named point "committed" (`stop`, see turn.STOP_POINTS). Should either fail, the next
    writer of this process records them first."""
    try:
        stop("committed")
        ledger.record(spark, transactions, commits, uuid_sql)
    except Exception:
        lock.mark_unrecorded(target for target, _ in commits)
        raise


@dataclass(eq=False)
class Waiting:
    """A history table's commit whose transactions the transactions table lacks yet (`commit`
    None: the table is writing it)."""

    target: str
    commit: ledger.Commit | None = None
    recorded: bool = False


_mutex = threading.Lock()
_changed = threading.Condition(_mutex)
_waiting: dict[str, list[Waiting]] = {}  # per transactions table
_writing: dict[str, list[Waiting]] = {}  # per transactions table: the tables committing outside the turn
# How long a committed table waits at most for the tables that were writing when it committed,
# so that one record takes them all: about a MERGE of a small batch, a few times over.
PEERS_SECONDS = 10.0


@contextlib.contextmanager
def writing(transactions: str, target: str) -> Iterator[Waiting]:
    """The block writes `target`'s commit outside the turn: a table of this process that commits
    meanwhile waits for it (`wait`), so that one record takes both. Whatever ends the block
    (its commit waiting, an error) ends the wait for it."""
    entry = Waiting(target)
    with _mutex:
        _writing.setdefault(transactions, []).append(entry)
    try:
        yield entry
    finally:
        with _changed:
            if entry in _writing.get(transactions, []):
                _writing[transactions].remove(entry)
            _changed.notify_all()


def wait(transactions: str, mine: Waiting, commit: ledger.Commit, peers: bool = True) -> None:
    """Count `commit` (of `mine`, a `writing` block's) among those to record next; then, with
    `peers`, wait (up to PEERS_SECONDS) until the other tables writing now have committed too,
    or failed, or until another thread recorded this commit. Called outside the turn: the
    tables waited for never wait for this thread (over Spark Connect the thread keeps its turn,
    and waits for no one: `peers` false)."""
    with _changed:
        mine.commit = commit
        _waiting.setdefault(transactions, []).append(mine)
        writing_now = _writing.get(transactions, [])
        if mine in writing_now:
            writing_now.remove(mine)
        _changed.notify_all()
        if not peers:
            return
        before = list(writing_now)
        _changed.wait_for(
            lambda: mine.recorded or not any(w in _writing.get(transactions, []) for w in before), PEERS_SECONDS
        )


def withdraw(transactions: str, target: str) -> None:
    """Under the writer's turn, before a recovery checks `target`: a commit of it that still
    waits has no thread left to record it (an error after its commit stopped that thread), and
    the recovery records it from the table's own commits instead: it must not be recorded twice."""
    with _mutex:
        left = [w for w in _waiting.get(transactions, []) if w.target != target]
        _waiting[transactions] = left


def record_waiting(
    spark: SparkSession, transactions: str, mine: Waiting, uuid_sql: str, stop: Callable[[str], None]
) -> None:
    """Under the writer's turn: record `mine` with every other commit that waits, in one
    statement (record_commits), unless another thread's record took it already. Should the
    record fail, the other threads' commits wait again, for their own threads to record."""
    with _mutex:
        if mine.recorded:
            return
        together = _waiting.pop(transactions, [])
    try:
        record_commits(
            spark, transactions, [(w.target, w.commit) for w in together if w.commit is not None], uuid_sql, stop=stop
        )
    except BaseException:
        with _mutex:
            _waiting.setdefault(transactions, []).extend(w for w in together if w is not mine)
        raise
    with _changed:
        for entry in together:
            entry.recorded = True
        _changed.notify_all()
