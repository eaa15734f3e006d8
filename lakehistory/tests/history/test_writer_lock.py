"""One writer at a time (lakehistory.history.lock) on real Delta tables: two writers racing for
the lock get it one at a time, a held lock stops a history model before it changes anything and
names the holder, a lapsed or dead one is taken over, a table with nothing pending takes no lock,
and a second process on the embedded lakehouse is told that it is in use. Through one Connect
server: test_spark_connect.py (two runs take turns) and test_connect_writer.py (a dead client, a
stalled one)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from engine_case import stopping
from history_case import HistoryCase, T, batch, version

from harness import DbtProject, copy_project, transaction_rows, unique_schema
from lakehistory.history import ledger, turn
from lakehistory.history import lock as lock_module
from lakehistory.history.ledger import ensure_transactions_table
from lakehistory.history.statements import SESSION_DELTA_VERSION, SESSION_STARTED_AT, SESSION_TXN_ID, run_transaction
from lakehistory.history.transactions import column_list
from lakehistory.history.writer import Writer
from lakehistory.landing.batch import Column

COLS = [Column("id", "bigint"), Column("name", "string")]


@pytest.fixture(scope="module")
def project(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("writer")), unique_schema("writer"))
    project.spark.sql(f"create schema if not exists `{project.schema}`")
    return project


def lock_of(project: DbtProject) -> str:
    return project.table("lakehistory_transactions_writer")


def test_two_writers_racing_for_the_lock_get_it_one_at_a_time(project: DbtProject) -> None:
    spark, lock = project.spark, project.table("race_writer")
    lock_module._create(spark, lock)

    def attempt(start: threading.Barrier, won: dict[str, bool], token: str) -> None:
        start.wait()
        won[token] = lock_module.take(spark, lock, token, f"writer {token}")

    for round_ in range(2):
        start = threading.Barrier(2)
        won: dict[str, bool] = {}
        threads = [threading.Thread(target=attempt, args=(start, won, t)) for t in (f"a{round_}", f"b{round_}")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(won.values()) == [False, True], won
        winner = next(t for t, ok in won.items() if ok)
        assert [r["token"] for r in project.rows(f"select token from {lock}")] == [winner]
        lock_module.let_go(spark, lock, winner)


def test_renewing_the_lock_while_dbt_lists_the_schema_hides_no_relation(project: DbtProject) -> None:
    """A dbt run starts while this process's keeper renews the lock: the lock's statements make
    nothing in dbt's session that dbt's listing of the schema could see and then miss (a missed
    relation made dbt-spark believe the whole schema was empty). The listing looks up the
    schema's tables before the session's temporary views: many tables make the span in which a
    view dropped meanwhile is missed long enough to hit."""
    spark, schema = project.spark, f"`{project.schema}_listing`"
    spark.sql(f"create schema {schema}")
    for n in range(40):
        spark.sql(f"create view {schema}.`v{n}` as select {n} as n")
    lock = f"{schema}.`lakehistory_transactions_writer`"
    lock_module._create(spark, lock)
    stop, renewals, failures = threading.Event(), [0], []

    def renew() -> None:
        while not stop.is_set():
            lock_module.take(spark, lock, "keeper", "keeper")
            renewals[0] += 1

    keeper = threading.Thread(target=renew)
    keeper.start()
    try:
        while renewals[0] < 6 and not failures:
            try:
                spark.sql(f"show table extended in {schema} like '*'").collect()
            except Exception as exc:
                failures.append(str(exc).splitlines()[0])
    finally:
        stop.set()
        keeper.join()
    assert failures == [], failures


def test_letting_go_at_exit_waits_for_a_renewal_in_flight(project: DbtProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that exits while its keeper renews the lock leaves it free: letting go waits for
    the renewal to commit. Both rewrite the lock's one row, so a release that overlapped the
    renewal's commit was refused and the hold stayed for a whole lease."""
    spark, lock = project.spark, project.table("exit_writer")
    renewing, releasing, spans = threading.Event(), threading.Event(), {}
    update = lock_module._update

    def timed(*args: object) -> None:
        if args[1] != lock:  # a keeper of another test's lock, still renewing in this process
            update(*args)
            return
        renewal = threading.current_thread().name == "lakehistory-writer"
        started = time.monotonic()
        if renewal:
            renewing.set()
            time.sleep(2)  # still renewing when the process exits
        update(*args)
        if renewal or releasing.is_set():  # not the take
            spans.setdefault("renewal" if renewal else "release", (started, time.monotonic()))

    monkeypatch.setattr(lock_module, "RENEW_SECONDS", 0.2)
    monkeypatch.setattr(lock_module, "_update", timed)
    lock_module.hold(spark, lock, 10)
    assert renewing.wait(10)
    releasing.set()
    lock_module.let_go_all()
    assert "renewal" in spans and spans["release"][0] >= spans["renewal"][1], spans
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [None]


def test_a_capture_or_cleanup_in_another_thread_takes_its_id_after_the_writer_in_progress(
    project: DbtProject,
) -> None:
    """dbt threads: while a history model holds the lock and records id 1, a capture's or
    cleanup's transaction waits, then takes id 2 (it took its id outside the lock before, and
    could take the same one)."""
    spark, transactions = project.spark, project.table("threads_transactions")
    lock, changed = project.table("threads_transactions_writer"), project.table("threads_changed")
    ensure_transactions_table(spark, transactions)
    spark.sql(f"create table {changed} using delta as select 1 as n")

    def row(txn_id: str, operation: str, started_at: str, delta_version: str) -> str:
        return (
            f"select {txn_id}, 'uuid', '{operation}', null, 'threads_changed', null, null, null, null, null,"
            f" {started_at}, current_timestamp(), 0, 0, 0, 0, 0, {delta_version}, null, null, null"
        )

    record = row(SESSION_TXN_ID, "cleanup", SESSION_STARTED_AT, SESSION_DELTA_VERSION)
    in_lock, taken = threading.Event(), []

    def history_writer() -> None:
        with lock_module.holding(spark, lock, 60):
            in_lock.set()
            time.sleep(2)  # the transaction below is waiting for the lock by now
            first_row = row("1", "batch", "current_timestamp()", "7")
            spark.sql(f"insert into {transactions} ({column_list()}) {first_row}")

    first = threading.Thread(target=history_writer)
    first.start()
    in_lock.wait()
    second = threading.Thread(
        target=lambda: taken.append(run_transaction(spark, Writer(transactions, lock, "''"), [], record, changed))
    )
    second.start()
    first.join()
    second.join()
    lock_module.let_go_all()
    assert taken == [2]
    rows = project.rows(f"select txn_id, operation, delta_version from {transactions} order by txn_id")
    assert [tuple(r.values()) for r in rows] == [(1, "batch", 7), (2, "cleanup", 0)]


def test_a_held_lock_stops_a_history_run_naming_its_holder_and_a_lapsed_one_is_taken_over(
    project: DbtProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the holder's liveness cannot be known (a metastore several processes share, a holder
    on another machine), only its lease says it is gone."""
    monkeypatch.setattr(lock_module, "_embedded_metastore", lambda spark: False)
    spark, lock = project.spark, lock_of(project)
    lock_module._create(spark, lock)
    assert lock_module.take(spark, lock, "elsewhere", "ops@batch-host pid 4242 jvm 4243 on 0123456789ab")
    case = HistoryCase(project, "ledger", COLS, ["id"])
    case.land(batch("ledger", COLS, "id", 1, "alice", [version(T(1), id=1, name="a")]))

    error = project.run_fails("run", "--select", "ledger", vars={"lakehistory_writer_wait_seconds": 0})
    assert "Another writer holds" in error and "ops@batch-host pid 4242" in error, error
    assert not case.exists() and case.transactions() == []

    # The holder died: once its hold lapses, the next run takes over.
    spark.sql(f"update {lock} set expires_at = current_timestamp() - interval 1 second")
    case.run()
    assert [t["txn_id"] for t in case.transactions()] == [1]
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [lock_module.TOKEN]
    lock_module.let_go_all()
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [None]


def dead_label(spark) -> str:
    """The label of a holder on this machine whose process and JVM are gone."""
    child = subprocess.Popen(["true"])  # noqa: S607 - a process that has exited
    child.wait()
    user_host = lock_module.holder_label(spark).split(" pid ")[0]
    return f"{user_host} pid {child.pid} jvm {child.pid} on {lock_module._machine()}"


@pytest.mark.parametrize("embedded", [True, False], ids=["embedded_metastore", "same_machine"])
def test_a_dead_holder_is_taken_over_at_once(project: DbtProject, monkeypatch: pytest.MonkeyPatch, embedded) -> None:
    """On the embedded metastore every other holder is dead (the metastore admits one process);
    elsewhere, one on this machine whose process and JVM are gone. Its hold has not lapsed: the run
    takes over without waiting, and says so."""
    if not embedded:
        monkeypatch.setattr(lock_module, "_embedded_metastore", lambda spark: False)
    spark, lock = project.spark, lock_of(project)
    lock_module._create(spark, lock)
    holder = "ops@batch-host pid 4242 jvm 4243 on 0123456789ab" if embedded else dead_label(spark)
    assert lock_module.dead_because(spark, holder)
    assert lock_module.take(spark, lock, "dead", holder)
    said: list[str] = []
    monkeypatch.setattr(lock_module, "say", said.append)
    lock_module.hold(spark, lock, wait_seconds=0)
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [lock_module.TOKEN]
    assert said and f"from {holder}" in said[0], said
    lock_module.let_go_all()
    # a live holder of this machine (this very process, under another token) is not dead
    if not embedded:
        assert lock_module.dead_because(spark, lock_module.holder_label(spark)) is None


def test_recording_an_id_another_writer_took_fails_and_records_nothing(project: DbtProject) -> None:
    spark, transactions = project.spark, project.table("fenced_transactions")
    ensure_transactions_table(spark, transactions)

    ledger.insert_transactions(spark, transactions, spark.sql(transaction_rows(1)), 1)
    with pytest.raises(ledger.TransactionTakenError, match="no longer held the writer lock"):
        ledger.insert_transactions(spark, transactions, spark.sql(transaction_rows(2, 1)), 1)
    assert [r["txn_id"] for r in project.rows(f"select txn_id from {transactions}")] == [1]
    # A sync's tables share its id; another table of another sync (or of none) may not.
    ledger.insert_transactions(spark, transactions, spark.sql(transaction_rows(2, history="a", sync="s")), 2)
    ledger.insert_transactions(spark, transactions, spark.sql(transaction_rows(2, history="b", sync="s")), 2)
    for history, sync in (("c", "other"), ("d", None), ("a", "s")):
        with pytest.raises(ledger.TransactionTakenError):
            ledger.insert_transactions(
                spark, transactions, spark.sql(transaction_rows(2, history=history, sync=sync)), 2
            )
    recorded = project.rows(f"select txn_id, history_table from {transactions} order by txn_id, history_table")
    assert [(r["txn_id"], r["history_table"]) for r in recorded] == [(1, "fenced"), (2, "a"), (2, "b")]


def test_a_run_paused_past_its_lease_stops_before_its_commit(
    project: DbtProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run computed its batch, then its process was paused past the lease while another
    writer took the lock: it commits nothing, records nothing, and says why."""
    case = HistoryCase(project, "paused", COLS, ["id"])
    case.land(batch("paused", COLS, "id", 1, "alice", [version(T(1), id=1, name="a")]))
    case.run()
    before = case.physical_rows()
    case.land(batch("paused", COLS, "id", 2, "alice", [version(T(2), id=1, name="b")]))

    def pause(point: str) -> None:
        if point == "computed":
            for held in lock_module._held.values():
                held.renewed -= lock_module.LEASE_SECONDS

    monkeypatch.setattr(turn, "reached", stopping("apply", pause))
    error = case.run_fails()
    assert "past its lease" in error, error
    assert case.physical_rows() == before and len(case.transactions()) == 1
    lock_module.let_go_all()


def test_a_table_with_nothing_pending_is_left_alone_without_the_writer_lock(
    project: DbtProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most tables of a sync have nothing new: their node does not wait for the writer lock. A
    column declared meanwhile still joins the table (through the lock)."""
    case = HistoryCase(project, "idle", COLS, ["id"])
    case.land(batch("idle", COLS, "id", 1, "alice", [version(T(1), id=1, name="a")]))
    case.run()
    before = case.physical_rows()

    def no_lock(*args, **kwargs) -> None:
        raise AssertionError("a table with nothing pending took the writer lock")

    with monkeypatch.context() as patched:
        patched.setattr(lock_module, "hold", no_lock)
        case.run()
    assert case.physical_rows() == before and len(case.transactions()) == 1

    wider = HistoryCase(project, "idle", [*COLS, Column("city", "string")], ["id"])
    wider.run()
    rows = wider.physical_rows()
    assert [r.pop("city") for r in rows] == [None] and rows == before
    assert len(case.transactions()) == 1


def test_a_run_killed_while_it_holds_the_lock_is_taken_over_at_once(project: DbtProject, tmp_path: Path) -> None:
    """A `dbt run` of its own lakehouse is killed (its whole process group) once it holds the
    writer lock; run again at once, it takes the lock over from the dead run and converges."""
    lakehouse = tmp_path / "lakehouse"
    case = HistoryCase(project, "killed", COLS, ["id"])
    for n in (1, 2, 3):
        case.land(batch("killed", COLS, "id", n, "alice", [version(T(n), id=n % 2, name=f"v{n}")]))
    command, env = project.process("run", "--select", "killed")
    env["LAKEHISTORY_LAKEHOUSE"] = str(lakehouse)
    tables = lakehouse / "warehouse" / f"{project.schema}.db"
    taken = tables / "lakehistory_transactions_writer" / "_delta_log" / f"{1:020d}.json"  # its first take
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    first = subprocess.Popen(command, env=env, start_new_session=True, **quiet)  # noqa: S603 - the venv's dbt
    try:
        deadline = time.monotonic() + 300
        while not taken.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert taken.exists(), "the run never took the writer lock"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    started = time.monotonic()
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)  # noqa: S603
    print(f"the rerun after the kill took {time.monotonic() - started:.1f} s")
    assert second.returncode == 0, second.stdout[-3000:]
    assert "Taking over the writer lock" in second.stdout and "embedded metastore" in second.stdout, second.stdout
    spark = project.spark
    recorded = spark.read.format("delta").load(str(tables / "lakehistory_transactions"))
    assert sorted((r.txn_id, r.batch_id) for r in recorded.collect()) == [(1, "000001"), (2, "000002"), (3, "000003")]
    history = spark.read.format("delta").load(str(tables / "killed")).where("valid_to = 9223372036854775807")
    assert sorted((r.id, r.name) for r in history.where("_fivetran_active").collect()) == [(0, "v2"), (1, "v3")]


def test_a_second_process_on_the_embedded_lakehouse_is_told_it_is_in_use(project: DbtProject) -> None:
    """This process has the lakehouse's embedded metastore open (its Spark session runs)."""
    assert project.spark is not None
    command, env = project.process("show", "--inline", "select 1 as x")
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)  # noqa: S603 - the venv's dbt
    assert second.returncode != 0
    assert "The lakehouse is in use by another process" in second.stdout, second.stdout[-2000:]
