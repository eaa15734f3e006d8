"""One writer at a time (lakehistory.history.writer) on real Delta tables: two writers racing for
the lock get it one at a time, a held lock stops a history model before it changes anything and
names the holder, a lapsed one is taken over, and a second process on the embedded lakehouse is
told that it is in use. Two dbt runs through one Connect server: test_spark_connect.py."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from history_case import HistoryCase, T, batch, version

from harness import DbtProject, copy_project, unique_schema
from lakehistory.history import writer
from lakehistory.history.apply import DELTA_VERSION, STARTED_AT, TXN_ID, run_transaction
from lakehistory.history.transactions import column_list, ensure_transactions_table
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
    writer._create(spark, lock)

    def attempt(start: threading.Barrier, won: dict[str, bool], token: str) -> None:
        start.wait()
        won[token] = writer.take(spark, lock, token, f"writer {token}")

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
        writer.let_go(spark, lock, winner)


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
    writer._create(spark, lock)
    stop, renewals, failures = threading.Event(), [0], []

    def renew() -> None:
        while not stop.is_set():
            writer.take(spark, lock, "keeper", "keeper")
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
    update = writer._update

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

    monkeypatch.setattr(writer, "RENEW_SECONDS", 0.2)
    monkeypatch.setattr(writer, "_update", timed)
    writer.hold(spark, lock, 10)
    assert renewing.wait(10)
    releasing.set()
    writer.let_go_all()
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

    def insert(txn_id: str, operation: str, started_at: str, delta_version: str) -> str:
        return (
            f"insert into {transactions} ({column_list(spark)}) select {txn_id}, 'uuid', '{operation}', null,"
            f" 'threads_changed', null, null, null, null, null, {started_at}, current_timestamp(), 0, 0, 0, 0, 0,"
            f" {delta_version}"
        )

    record = insert(TXN_ID, "cleanup", STARTED_AT, DELTA_VERSION)
    in_lock, taken = threading.Event(), []

    def history_writer() -> None:
        with writer.holding(spark, lock, 60):
            in_lock.set()
            time.sleep(2)  # the transaction below is waiting for the lock by now
            spark.sql(insert("1", "batch", "current_timestamp()", "7"))

    first = threading.Thread(target=history_writer)
    first.start()
    in_lock.wait()
    second = threading.Thread(
        target=lambda: taken.append(run_transaction(spark, transactions, [], "''", lock, [], record, changed))
    )
    second.start()
    first.join()
    second.join()
    writer.let_go_all()
    assert taken == [2]
    rows = project.rows(f"select txn_id, operation, delta_version from {transactions} order by txn_id")
    assert [tuple(r.values()) for r in rows] == [(1, "batch", 7), (2, "cleanup", 0)]


def test_a_held_lock_stops_a_history_run_naming_its_holder_and_a_lapsed_one_is_taken_over(
    project: DbtProject,
) -> None:
    spark, lock = project.spark, lock_of(project)
    writer._create(spark, lock)
    assert writer.take(spark, lock, "elsewhere", "ops@batch-host pid 4242")
    case = HistoryCase(project, "ledger", COLS, ["id"])
    case.land(batch("ledger", COLS, "id", 1, "alice", [version(T(1), id=1, name="a")]))

    error = project.run_fails("run", "--select", "ledger", vars={"lakehistory_writer_wait_seconds": 0})
    assert "Another writer holds" in error and "ops@batch-host pid 4242" in error, error
    assert not case.exists() and case.transactions() == []

    # The holder died: once its hold lapses, the next run takes over.
    spark.sql(f"update {lock} set expires_at = current_timestamp() - interval 1 second")
    case.run()
    assert [t["txn_id"] for t in case.transactions()] == [1]
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [writer.TOKEN]
    writer.let_go_all()
    assert [r["token"] for r in project.rows(f"select token from {lock}")] == [None]


def test_a_second_process_on_the_embedded_lakehouse_is_told_it_is_in_use(project: DbtProject) -> None:
    """This process has the lakehouse's embedded metastore open (its Spark session runs)."""
    assert project.spark is not None
    command, env = project.process("show", "--inline", "select 1 as x")
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)  # noqa: S603 - the venv's dbt
    assert second.returncode != 0
    assert "The lakehouse is in use by another process" in second.stdout, second.stdout[-2000:]
