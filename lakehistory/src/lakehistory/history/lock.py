"""One writer at a time per transactions table: the lock every new transaction id is taken under.

Ids are max + 1, so a writer must be alone from reading the last id until its transaction is
recorded. Two dbt runs through one Spark Connect server (or embedded sessions sharing a
metastore) are two processes: they meet in a one-row Delta table beside the transactions table,
`<transactions>_writer`, which names the holder and when its hold lapses.

- Taking it is a MERGE into that row where it is free, lapsed, already ours or a dead holder's.
  Two writers that race both rewrite the row's one file, so Delta commits one and refuses the
  other (a concurrent modification): the loser reads the row, sees who holds it, and waits.
- A process keeps it while it writes: a background thread renews it every RENEW_SECONDS, and
  lets it go once the process has taken no id for IDLE_SECONDS, or at exit.
  Letting go, it writes into the row whether it left a commit unrecorded; only a holder that
  follows one that may have (or a dead or lapsed one) checks every history table (writer.py).
- A holder known to be dead is taken over at once (`dead_because`): on an embedded metastore,
  which admits one process at a time, every other holder is; on this host, a holder whose Python
  process and Spark JVM are both gone; through a Connect server, a holder whose session the
  server has closed, or whose process is gone from this host (its session is then closed first,
  which stops whatever statements it left running). Elsewhere a dead holder stops renewing, and
  LEASE_SECONDS later the next writer takes over. Either way the ledger's recovery then records
  whatever the dead run had committed.
- A holder that stalled past its lease (a long pause, a suspended machine) learns it on its next
  renewal or before its next commit (`check_held`), and recording an id another writer took
  meanwhile fails as a whole (ledger.insert_transactions).
- Within one process, dbt threads take `in_process` in turn around each history apply and
  each recovery before a capture's or cleanup's id. A history apply whose transaction ids are
  a sync's, reserved already, writes its table outside that turn (`writing_outside_turn`), so
  the tables of a sync commit side by side; the process keeps the lock meanwhile.
- The lock's statements run in a session of their own (`_lock_session`), so nothing they do is
  seen by the statements of dbt's session that run meanwhile.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import getpass
import hashlib
import itertools
import logging
import os
import re
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from lakehistory.errors import HistoryError
from lakehistory.history.session import classic_session, writer_turn
from lakehistory.history.transactions import create_if_missing
from lakehistory.invocation import say

LEASE_SECONDS = 300
RENEW_SECONDS = 60
IDLE_SECONDS = 60
POLL_SECONDS = 2
LET_GO_WAIT_SECONDS = 30  # at exit, for a renewal in flight

TOKEN = uuid.uuid4().hex  # this process's
_takes = itertools.count(1)
_active = threading.local()
# Per writer lock, the history tables whose last commit this process could not record (writer.py
# records them before its next id, into that lock's transactions table and no other: a process may
# write a lakehouse and its branches). A process that lets go of a lock with any says so in its row.
unrecorded: dict[str, set[str]] = {}
# The history tables a dbt thread of this process is committing to outside `in_process`
# (writing_outside_turn): their commits are that thread's to record, not another's to recover.
writing: set[str] = set()
UNRECORDED = "unrecorded commits in: "
log = logging.getLogger(__name__)
in_process = writer_turn


class WriterBusyError(HistoryError):
    """Another process holds the writer lock and did not let go within the wait."""


class WriterLostError(HistoryError):
    """This process held the writer lock past its lease, and another writer took it meanwhile."""


@dataclass
class _Hold:
    spark: SparkSession  # the lock's own (_lock_session)
    renewed: float  # time.monotonic() of the last take or renewal
    used: float  # ... of the last id taken under it
    stop: threading.Event = field(default_factory=threading.Event)
    keeper: threading.Thread | None = None  # renews the hold (_keep)
    lost: bool = False  # a renewal found another writer holding the lock
    epoch: int = 0  # which take of the lock this is: a new one after each let go or loss
    # The take found the lock let go by a holder that recorded every commit it made: no history
    # table can then hold a commit the transactions table lacks, but this process's own.
    clean: bool = False
    scanned: bool = False  # the history tables were checked for unrecorded commits under this hold


_held: dict[str, _Hold] = {}


def holder_label(spark: SparkSession | None = None) -> str:
    """Who holds the lock, for people and for `dead_because`: user, host, this process's pid, the
    pid of its Spark JVM or, through Connect (whose statements run in the server), its session and
    the session's user, and the machine's identity (containers may share a host name, never a
    boot and a pid namespace)."""
    label = f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"
    if spark is not None and not classic_session(spark):
        connect: Any = spark  # pyspark.sql.connect's SparkSession
        label += f" session {connect.session_id} of {connect.client._user_id or '-'}"
    elif spark is not None:
        label += f" jvm {_jvm_pid(spark)}"
    return f"{label} on {_machine()}"


_LABEL = re.compile(
    r"^[^@ ]*@(?P<host>[^@ ]*) pid (?P<pid>\d+)(?: jvm (?P<jvm>\d+))?"
    r"(?: session (?P<session>[0-9a-f-]+) of (?P<user>\S+))? on (?P<machine>[0-9a-f]+)$"
)


def dead_because(spark: SparkSession, holder: str | None) -> str | None:
    """Why the holder `holder` (its label) cannot be running any more, or None when it may be."""
    if _embedded_metastore(spark):
        return "this process has the lakehouse's embedded metastore open, which admits one process at a time"
    found = _LABEL.match(holder or "")
    if not found:
        return None
    here, pid = found["machine"] == _machine(), int(found["pid"])
    if found["jvm"]:
        jvm = int(found["jvm"])
        if here and not _alive(pid) and not _alive(jvm):
            return f"its process {pid} and Spark JVM {jvm} are gone from this machine"
    elif found["session"] and not classic_session(spark):
        return _session_dead_because(spark, found["session"], found["user"], pid if here else None)
    return None


_sessions_elsewhere: set[str] = set()  # holders' sessions this process's server does not know
_closed_here: dict[str, str] = {}  # holders' sessions this process closed: why


def _session_dead_because(spark: SparkSession, session: str, user: str, pid: int | None) -> str | None:
    """Through Connect: whether the server closed the holder's session, or (`pid`: a holder of
    this machine) its process is gone, in which case its session is closed here, after its
    statements still running are interrupted. A session the server does not know is on another
    server, or was lost with a restart, and one it cannot answer for may be alive: the lease
    decides. GetStatus calls, no Spark job."""
    if session in _sessions_elsewhere:
        return None
    from pyspark.sql.connect.client import ChannelBuilder, SparkConnectClient

    builder = copy.copy(spark.client._builder)  # this client's server and credentials, the holder's session
    builder._params = {**builder._params, ChannelBuilder.PARAM_SESSION_ID: session}
    builder._params.pop(ChannelBuilder.PARAM_USER_ID, None)
    client = SparkConnectClient(connection=builder, user_id=None if user == "-" else user)
    try:
        state = _session_state(client)
        if state == "closed":
            return _closed_here.get(session, f"its Spark Connect session {session} is closed")
        if state == "unknown":
            _sessions_elsewhere.add(session)
        elif pid is not None and not _alive(pid):
            client.interrupt_all()
            _wait_for_statements(client)
            client.release_session()
            _closed_here[session] = (
                f"its process {pid} is gone from this machine; its Spark Connect session {session} is now closed,"
                " its statements stopped"
            )
            return _closed_here[session]
    except Exception as exc:  # the server did not answer: the holder may be alive
        log.debug("asking the server about session %s failed: %s", session, exc)
    finally:
        client.close()
    return None


def _session_state(client: Any) -> str:
    """The holder's session as the server knows it: open, closed, or unknown."""
    try:
        client._get_operation_statuses()
    except Exception as exc:
        for error, state in (("SESSION_CLOSED", "closed"), ("SESSION_NOT_FOUND", "unknown")):
            if error in str(exc):
                return state
        raise
    return "open"


def _wait_for_statements(client: Any, settle_seconds: float = 5, seconds: float = 60) -> None:
    """Until the interrupt reached every statement of the client's session (none is running) and
    the interrupted ones ended, or settle_seconds after that: one the server keeps terminating
    (waiting for its dead client) has had its jobs cancelled, and a commit that still lands is
    what the ledger's recovery and its fenced record are for."""
    deadline, settled = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        states = {type(s).OperationState.Name(s.state) for s in client._get_operation_statuses().operation_statuses}
        if "OPERATION_STATE_RUNNING" not in states:
            settled = settled or time.monotonic() + settle_seconds
            if "OPERATION_STATE_TERMINATING" not in states or time.monotonic() >= settled:
                return
        time.sleep(0.2)


def _embedded_metastore(spark: SparkSession) -> bool:
    """This process runs Spark itself (not through Connect) on an embedded Derby metastore."""
    if not classic_session(spark):
        return False
    conf = spark.sparkContext.getConf()
    if conf.get("spark.sql.catalogImplementation", "in-memory") != "hive" or conf.get(
        "spark.hadoop.hive.metastore.uris", ""
    ):
        return False
    url = conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "jdbc:derby:;databaseName=metastore_db")
    return url.startswith("jdbc:derby:") and not url.startswith("jdbc:derby://")


def _jvm_pid(spark: SparkSession) -> int:
    jvm: Any = spark.sparkContext._jvm
    return int(jvm.java.lang.ProcessHandle.current().pid())


def _machine() -> str:
    """This machine's identity: its boot and its pid namespace."""
    parts = [socket.gethostname()]
    with contextlib.suppress(OSError):
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    with contextlib.suppress(OSError):
        parts.append(os.readlink("/proc/self/ns/pid"))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def hold(spark: SparkSession, lock: str, wait_seconds: float) -> None:
    """Hold the writer lock `lock` for this process, waiting up to `wait_seconds` for another
    holder to let go or lapse. Call it with `in_process` held, before reading the last id."""
    now = time.monotonic()
    held = _held.get(lock)
    if held and not held.lost and now - held.renewed < LEASE_SECONDS - RENEW_SECONDS:
        held.used = now
        return
    spark = _lock_session(spark)
    _create(spark, lock)
    deadline, label, dead, waiting = now + wait_seconds, holder_label(spark), None, False
    while not take(spark, lock, TOKEN, label, dead):
        row = spark.sql(f"select holder, token, taken_at, expires_at from {lock}").collect()[0]
        reason = dead_because(spark, row.holder)
        if reason and row.token != dead:  # once per dead holder: another writer may take it first
            say(f"Taking over the writer lock {lock} from {row.holder}: {reason}.")
            dead = row.token
            continue
        if time.monotonic() >= deadline:
            raise WriterBusyError(
                f"Another writer holds this lakehouse's transactions ({lock}): {row.holder}, since"
                f" {row.taken_at} UTC; its hold lapses at {row.expires_at} UTC unless it is still running."
                " Nothing was changed. Run again when it is done, or give the var"
                " lakehistory_writer_wait_seconds more time."
            )
        if not waiting:
            say(
                f"Waiting up to {wait_seconds:.0f} s for the writer lock {lock}: {row.holder} holds it since"
                f" {row.taken_at} UTC, until it lets go or its hold lapses at {row.expires_at} UTC."
            )
            waiting = True
        _wait_for_change(spark, lock, row.holder, deadline)
    now, clean = time.monotonic(), _left_clean(spark, lock)
    if held:
        held.renewed = held.used = now
        held.lost, held.clean, held.scanned = False, clean, False
        held.epoch = next(_takes)
        return
    _held[lock] = new = _Hold(spark, now, now, epoch=next(_takes), clean=clean)
    new.keeper = threading.Thread(target=_keep, args=(lock, new), name="lakehistory-writer", daemon=True)
    new.keeper.start()


def _left_clean(spark: SparkSession, lock: str) -> bool:
    """Whether the take just made replaced the row of a fresh lock, or one its last holder let go
    of with every commit recorded (`let_go` leaves an empty holder then; a release by a version of
    lakehistory before this one left none, and does not count)."""
    before = _version(spark, lock) - 1
    row = spark.sql(f"select holder, token from {lock} version as of {int(before)}").collect()[0]
    return row.token is None and (row.holder == "" or before == 0)


def must_check_every_table() -> bool:
    """Whether the history tables must be checked for commits the transactions table lacks before
    the next id: once per hold whose take was not clean (a dead or lapsed holder, or one that let
    go with a commit unrecorded). Call it in a `holding` block; `checked_every_table` says it
    was done."""
    found = getattr(_active, "hold", None)
    held = _held.get(found[0]) if found else None
    return held is None or not (held.clean or held.scanned)


def checked_every_table() -> None:
    found = getattr(_active, "hold", None)
    held = _held.get(found[0]) if found else None
    if found is not None and held is not None and held.epoch == found[1]:
        held.scanned = True


def check_held() -> None:
    """Before a commit that takes ids: stop if this process may have lost a lock it holds (a
    renewal found another holder, or none succeeded for most of a lease: the process was paused).
    No statement: what the keeper last saw."""
    for lock, held in list(_held.items()):
        if held.lost or time.monotonic() - held.renewed >= LEASE_SECONDS - RENEW_SECONDS / 2:
            raise WriterLostError(
                f"This run held the writer lock {lock} past its lease ({LEASE_SECONDS} s without renewing it:"
                " the process was paused or cut off), so another writer may have taken it. It stops before its"
                " next commit; what it committed before is recorded by the next run. Run again."
            )


def _wait_for_change(spark: SparkSession, lock: str, holder: str, deadline: float) -> None:
    """Sleep until the lock's table changes (its holder let go or renewed), its holder is found
    dead, a renewal is overdue (the hold may lapse) or the deadline. A poll reads the lock table's
    newest commit (one small job on Delta's log, where a take is a MERGE) and checks the holder's
    liveness (no Spark at all)."""
    version = _version(spark, lock)
    until = min(deadline, time.monotonic() + RENEW_SECONDS + POLL_SECONDS)
    while time.monotonic() < until:
        time.sleep(POLL_SECONDS)
        if _version(spark, lock) != version or dead_because(spark, holder):
            return


def _version(spark: SparkSession, lock: str) -> int:
    return int(spark.sql(f"describe history {lock} limit 1").collect()[0].version)


@contextlib.contextmanager
def holding(spark: SparkSession, lock: str, wait_seconds: float) -> Iterator[None]:
    """The writer lock for the block: this thread alone in the process, this process alone on
    the transactions table."""
    with in_process:
        hold(spark, lock, wait_seconds)
        outer = getattr(_active, "hold", None)
        _active.hold = (lock, _held[lock].epoch)
        try:
            yield
        finally:
            _active.hold = outer


@contextlib.contextmanager
def writing_outside_turn(target: str) -> Iterator[None]:
    """Inside a `holding` block: let the other dbt threads of the process take their turn while
    this one commits to the history table `target`, whose transaction ids are reserved already
    (a sync's). The process keeps the lock (the keeper does not let go while a table is written);
    the turn is taken again after the block, and the record that follows is fenced as any is.
    Over Spark Connect the thread keeps its turn (own_session holds it for the whole apply: the
    statements share one server session's views and settings)."""
    found = getattr(_active, "hold", None)
    writing.add(target)
    in_process.release()
    try:
        yield
    finally:
        in_process.acquire()
        writing.discard(target)
        if found is not None:
            held = _held.get(found[0])
            if held is not None:
                held.used = time.monotonic()


def unrecorded_of(lock: str) -> set[str]:
    """The history tables of the writer lock `lock` with a commit this process did not record."""
    return unrecorded.setdefault(lock, set())


def mark_unrecorded(targets: Iterable[str], recorded: bool = False) -> None:
    """Count the history tables `targets` as holding a commit the transactions table lacks (or,
    `recorded`, no longer), under the lock the calling thread writes under."""
    found = getattr(_active, "hold", None)
    tables = unrecorded_of(found[0] if found else "")
    if recorded:
        tables.difference_update(targets)
    else:
        tables.update(targets)


def hold_of(lock: str) -> int | None:
    """Which take of `lock` this process holds now (None: none, or one it may have lost). While
    it stays the same, no other process has written to the lakehouse's tables."""
    held = _held.get(lock)
    return held.epoch if held is not None and not held.lost else None


def active_hold() -> tuple[str, int] | None:
    """The lock the calling thread writes under (a `holding` block) and which take of it this
    is. While it stays the same, no other process has written the transactions table: what this
    process read of it, and changed since, is what it holds (ledger.py keeps that)."""
    found = getattr(_active, "hold", None)
    if found is None:
        return None
    held = _held.get(found[0])
    return found if held is not None and not held.lost and held.epoch == found[1] else None


def take(spark: SparkSession, lock: str, token: str, holder: str, dead: str | None = None) -> bool:
    """One attempt: True when `token` holds the lock afterwards. `dead`: the token of a holder
    known to be dead, whose hold is taken over as long as it is still that holder's."""
    spark = _lock_session(spark)
    try:
        _update(
            spark,
            lock,
            token,
            holder,
            "t.`token` is null or t.`token` = s.`token` or t.`token` = s.`dead`"
            " or t.`expires_at` < current_timestamp()",
            "`holder` = s.`holder`, `token` = s.`token`, `taken_at` = current_timestamp(), " + _lapses(),
            dead,
        )
    except Exception as exc:
        if "concurrent" not in str(exc).lower():
            raise
    return bool(spark.sql(f"select `token` from {lock}").collect()[0].token == token)


def let_go(spark: SparkSession, lock: str, token: str) -> None:
    """Free the lock; its row says whether this process left a commit unrecorded (naming the
    history tables), for the next holder to check every table then, and nothing else."""
    _update(
        _lock_session(spark),
        lock,
        token,
        UNRECORDED + ", ".join(sorted(unrecorded_of(lock))) if unrecorded_of(lock) else "",
        "t.`token` = s.`token`",
        "`holder` = s.`holder`, `token` = null, `taken_at` = null, `expires_at` = null",
    )


def _lapses() -> str:
    return f"`expires_at` = current_timestamp() + make_dt_interval(0, 0, 0, {int(LEASE_SECONDS)})"


def _update(
    spark: SparkSession,
    lock: str,
    token: str,
    holder: str | None,
    where: str,
    assignments: str,
    dead: str | None = None,
) -> int:
    """Update the lock's row where `where` holds (`s` is this writer: its token and holder, and
    the token of a dead holder, as data, never SQL text). Returns the rows updated (0 or 1)."""
    me = spark.createDataFrame([(1, token, holder, dead)], "slot int, token string, holder string, dead string")
    # On the row's slot, not `on true`: Delta counts a one-row source twice through a join
    # without keys and warns about a changing source on every call.
    result = spark.sql(
        f"merge into {lock} as t using {{me}} as s on t.`slot` = s.`slot`"
        f" when matched and ({where}) then update set {assignments}",
        me=me,
    ).collect()
    return int(result[0]["num_updated_rows"]) if result else 0


_lock_sessions: weakref.WeakKeyDictionary[SparkSession, SparkSession] = weakref.WeakKeyDictionary()


def _lock_session(spark: SparkSession) -> SparkSession:
    """The session the lock's statements run in. Classic Spark binds the writer's DataFrame as a
    temporary view of the session for the statement; in dbt's own session a SHOW TABLES of dbt
    running meanwhile (a run starting while the keeper renews) would list that view and then
    miss it. A child session shares the metastore, Delta and the SparkContext, and keeps its
    temporary views to itself. Over Spark Connect the DataFrame travels with the statement."""
    if not classic_session(spark) or spark in _lock_sessions.values():  # Connect, or a lock's
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
        if writing:  # a commit outside the turn: its ids were taken under this hold
            held.used = time.monotonic()
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
            if _update(held.spark, lock, TOKEN, None, "t.`token` = s.`token`", _lapses()):
                held.renewed = time.monotonic()
            else:  # another writer took it while this process was paused
                held.lost = True
        except Exception as exc:  # the session is busy or gone: the next round renews, or the hold lapses
            log.debug("renewing %s failed: %s", lock, exc)


def forget(lock: str) -> None:
    """Stop keeping `lock`, whose table is about to be dropped (a branch's): nothing to let go of."""
    held = _held.pop(lock, None)
    if held is not None:
        held.stop.set()
    unrecorded.pop(lock, None)


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
