"""One writer at a time per transactions table: the lock every new transaction id is taken under.

Ids are max + 1, so a writer must be alone from reading the last id until its transaction is
recorded. Two dbt runs through one Spark Connect server (or embedded sessions sharing a
metastore) are two processes: they meet in a one-row Delta table beside the transactions table,
`<transactions>_writer`, which names the holder and when its hold lapses.

- Taking it is a MERGE into that row where it is free, lapsed or already ours. Two writers that
  race both rewrite the row's one file, so Delta commits one and refuses the other (a concurrent
  modification): the loser reads the row, sees who holds it, and waits.
- A process keeps it while it writes: a background thread renews it every RENEW_SECONDS, and
  lets it go once the process has taken no id for IDLE_SECONDS, or at exit. A holder that dies
  stops renewing: LEASE_SECONDS later the next writer takes over, and the ledger's recovery
  records whatever the dead run had committed.
- Within one process, dbt threads take `in_process` in turn around each history apply and
  each recovery before a capture's or cleanup's id.
- The lock's statements run in a session of their own (`_lock_session`), so nothing they do is
  seen by the statements of dbt's session that run meanwhile.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from lakehistory.history.table import HistoryError
from lakehistory.history.transactions import create_if_missing

LEASE_SECONDS = 300
RENEW_SECONDS = 60
IDLE_SECONDS = 60
POLL_SECONDS = 2
LET_GO_WAIT_SECONDS = 30  # at exit, for a renewal in flight

TOKEN = uuid.uuid4().hex  # this process's
log = logging.getLogger(__name__)
in_process = threading.RLock()


class WriterBusyError(HistoryError):
    """Another process holds the writer lock and did not let go within the wait."""


@dataclass
class _Hold:
    spark: SparkSession  # the lock's own (_lock_session)
    renewed: float  # time.monotonic() of the last take or renewal
    used: float  # ... of the last id taken under it
    stop: threading.Event = field(default_factory=threading.Event)
    keeper: threading.Thread | None = None  # renews the hold (_keep)


_held: dict[str, _Hold] = {}


def holder_label() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def hold(spark: SparkSession, lock: str, wait_seconds: float) -> None:
    """Hold the writer lock `lock` for this process, waiting up to `wait_seconds` for another
    holder to let go or lapse. Call it with `in_process` held, before reading the last id."""
    now = time.monotonic()
    held = _held.get(lock)
    if held and now - held.renewed < LEASE_SECONDS - RENEW_SECONDS:
        held.used = now
        return
    spark = _lock_session(spark)
    _create(spark, lock)
    deadline = now + wait_seconds
    while not take(spark, lock, TOKEN, holder_label()):
        if time.monotonic() >= deadline:
            row = spark.sql(f"select holder, taken_at, expires_at from {lock}").collect()[0]
            raise WriterBusyError(
                f"Another writer holds this lakehouse's transactions ({lock}): {row.holder}, since"
                f" {row.taken_at} UTC; its hold lapses at {row.expires_at} UTC unless it is still running."
                " Nothing was changed. Run again when it is done, or give the var"
                " lakehistory_writer_wait_seconds more time."
            )
        time.sleep(POLL_SECONDS)
    now = time.monotonic()
    if held:
        held.renewed = held.used = now
        return
    _held[lock] = new = _Hold(spark, now, now)
    new.keeper = threading.Thread(target=_keep, args=(lock, new), name="lakehistory-writer", daemon=True)
    new.keeper.start()


@contextlib.contextmanager
def holding(spark: SparkSession, lock: str, wait_seconds: float) -> Iterator[None]:
    """The writer lock for the block: this thread alone in the process, this process alone on
    the transactions table."""
    with in_process:
        hold(spark, lock, wait_seconds)
        yield


def take(spark: SparkSession, lock: str, token: str, holder: str) -> bool:
    """One attempt: True when `token` holds the lock afterwards."""
    spark = _lock_session(spark)
    try:
        _update(
            spark,
            lock,
            token,
            holder,
            "t.`token` is null or t.`token` = s.`token` or t.`expires_at` < current_timestamp()",
            "`holder` = s.`holder`, `token` = s.`token`, `taken_at` = current_timestamp(), " + _LAPSES,
        )
    except Exception as exc:
        if "concurrent" not in str(exc).lower():
            raise
    return spark.sql(f"select `token` from {lock}").collect()[0].token == token


def let_go(spark: SparkSession, lock: str, token: str) -> None:
    _update(
        _lock_session(spark),
        lock,
        token,
        None,
        "t.`token` = s.`token`",
        "`holder` = null, `token` = null, `taken_at` = null, `expires_at` = null",
    )


_LAPSES = f"`expires_at` = current_timestamp() + make_dt_interval(0, 0, 0, {LEASE_SECONDS})"


def _update(spark: SparkSession, lock: str, token: str, holder: str | None, where: str, assignments: str) -> None:
    """Update the lock's row where `where` holds (`s` is this writer: its token and holder, as
    data, never SQL text)."""
    me = spark.createDataFrame([(1, token, holder)], "slot int, token string, holder string")
    # On the row's slot, not `on true`: Delta counts a one-row source twice through a join
    # without keys and warns about a changing source on every call.
    spark.sql(
        f"merge into {lock} as t using {{me}} as s on t.`slot` = s.`slot`"
        f" when matched and ({where}) then update set {assignments}",
        me=me,
    )


_lock_sessions: weakref.WeakKeyDictionary[SparkSession, SparkSession] = weakref.WeakKeyDictionary()


def _lock_session(spark: SparkSession) -> SparkSession:
    """The session the lock's statements run in. Classic Spark binds the writer's DataFrame as a
    temporary view of the session for the statement; in dbt's own session a SHOW TABLES of dbt
    running meanwhile (a run starting while the keeper renews) would list that view and then
    miss it. A child session shares the metastore, Delta and the SparkContext, and keeps its
    temporary views to itself. Over Spark Connect the DataFrame travels with the statement."""
    if getattr(spark, "_jsparkSession", None) is None or spark in _lock_sessions.values():  # Connect, or a lock's
        return spark
    if spark not in _lock_sessions:
        child = spark.newSession()
        child.conf.set("spark.sql.shuffle.partitions", "1")  # one row
        _lock_sessions[spark] = child
    return _lock_sessions[spark]


def _create(spark: SparkSession, lock: str) -> None:
    """The lock table with its one free row (slot 1), made in one commit."""
    create_if_missing(
        spark,
        lock,
        f"create table if not exists {lock} using delta"
        " tblproperties ('delta.enableDeletionVectors' = 'false') as select 1 as slot,"
        " cast(null as string) as holder, cast(null as string) as token,"
        " cast(null as timestamp) as taken_at, cast(null as timestamp) as expires_at",
    )


def _keep(lock: str, held: _Hold) -> None:
    """Renew the hold while the process writes (a writer may run for long: renewing never waits
    for it); let go once the process has taken no id for IDLE_SECONDS and no writer runs."""
    while not held.stop.wait(RENEW_SECONDS):
        if time.monotonic() - held.used >= IDLE_SECONDS and in_process.acquire(blocking=False):
            try:
                if time.monotonic() - held.used >= IDLE_SECONDS:
                    _held.pop(lock, None)
                    let_go(held.spark, lock, TOKEN)
                    return
            except Exception:  # the session is gone: the hold lapses by itself
                return
            finally:
                in_process.release()
        try:
            _update(held.spark, lock, TOKEN, None, "t.`token` = s.`token`", _LAPSES)
            held.renewed = time.monotonic()
        except Exception as exc:  # the session is busy or gone: the next round renews, or the hold lapses
            log.debug("renewing %s failed: %s", lock, exc)


@atexit.register
def let_go_all() -> None:
    """Let go of every hold of this process (at exit, when it holds any)."""
    for lock, held in list(_held.items()):
        held.stop.set()
        if held.keeper is not None and held.keeper is not threading.current_thread():
            # A renewal in flight rewrites the lock's row: letting go meanwhile would clash with it
            # (Delta refuses one of two concurrent rewrites), and the hold would stay for a lease.
            held.keeper.join(timeout=LET_GO_WAIT_SECONDS)
        with contextlib.suppress(Exception):  # the session is already stopped: the hold lapses by itself
            let_go(held.spark, lock, TOKEN)
    _held.clear()
