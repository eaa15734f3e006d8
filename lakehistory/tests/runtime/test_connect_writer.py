"""The writer lock through a Spark Connect server, where every client's statements run in one
server: a client killed while it holds the lock is taken over by the one waiting as soon as its
process is gone (its session closed first, which stops what it left running), and a client
stopped past its lease while another takes over records nothing once it resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from object_store import StoreLanding

from harness import transaction_rows, unique_schema
from lakehistory.history import ledger
from lakehistory.history import lock as lock_module
from lakehistory.history.ledger import ensure_transactions_table
from lakehistory_tools.generator import GeneratorConfig, generate

pytestmark = pytest.mark.connect

STALLED_WRITER = Path(__file__).with_name("stalled_writer.py")


def session(url: str):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def lock_holder(spark, schema: str) -> str:
    if not spark.catalog.tableExists(f"{schema}.lakehistory_transactions_writer"):
        return ""
    return spark.sql(f"select holder from `{schema}`.`lakehistory_transactions_writer`").collect()[0].holder or ""


def test_a_client_killed_while_it_holds_the_lock_is_taken_over_by_the_one_waiting(
    connect_url: str, tmp_path: Path, store_landing: StoreLanding
):
    """Two `dbt run`s through the server, each of one history model: the second waits for the
    first, which is stopped once it holds the lock, then killed (its whole process group). The
    second takes over without waiting for the lease, and a rerun of the first converges."""
    spark = session(connect_url)
    project = store_landing.project(tmp_path / "project", "killed_client")
    generate(project.landing, GeneratorConfig(scale=2, syncs=1, seed=7), only_sync=1)
    store_landing.copy(project)
    killed_command, env = project.process("run", "--select", "meta_station_history")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    killed = subprocess.Popen(killed_command, env=env, start_new_session=True, **quiet)  # noqa: S603 - the venv's dbt
    try:
        deadline = time.monotonic() + 300
        while f" pid {killed.pid} " not in (holder := lock_holder(spark, project.schema)) and killed.poll() is None:
            assert time.monotonic() < deadline, "the first run never took the writer lock"
            time.sleep(0.2)
        os.killpg(killed.pid, signal.SIGSTOP)  # holding the lock: it cannot let go before the kill
        assert lock_module.dead_because(spark, holder) is None, holder
        waiting_command, env = project.process("run", "--select", "meta_network_history")
        waiting = subprocess.Popen(  # noqa: S603 - the venv's dbt
            waiting_command,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        said: list[tuple[float, str]] = []  # when each line came
        reader = threading.Thread(
            target=lambda: said.extend((time.monotonic(), x) for x in waiting.stdout), daemon=True
        )
        reader.start()
        while not any("Waiting up to" in line for _, line in said) and waiting.poll() is None:
            assert time.monotonic() < deadline + 300, "the second run never waited for the first"
            time.sleep(0.2)
        assert any(f"pid {killed.pid} " in line for _, line in said if "Waiting up to" in line), said
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        killed_at = time.monotonic()
    waiting.wait(timeout=600)
    reader.join(timeout=10)
    output = "".join(line for _, line in said)
    assert waiting.returncode == 0, output[-3000:]
    took_over = [(at, line) for at, line in said if "Taking over the writer lock" in line]
    assert took_over and f"its process {killed.pid} is gone" in took_over[0][1], output[-3000:]
    print(f"the waiting run took over {took_over[0][0] - killed_at:.1f} s after the kill: {took_over[0][1]}")

    holder_session = holder.split(" session ")[1].split()[0]
    assert lock_module.dead_because(spark, holder) == f"its Spark Connect session {holder_session} is closed"
    assert lock_module.dead_because(spark, lock_module.holder_label(spark)) is None  # this process's own session

    rerun = subprocess.run(killed_command, env=env, capture_output=True, text=True, timeout=600)  # noqa: S603
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    recorded = project.rows("select txn_id, history_table, batch_id from {schema}.lakehistory_transactions")
    # the two tables' batches are one sync: one id, reserved once, whichever run reserved it
    assert sorted(r["txn_id"] for r in recorded) == [1, 1], recorded
    batches = [(r["history_table"], r["batch_id"]) for r in recorded]
    tables = {f"{project.schema}.{model}" for model in ("meta_station_history", "meta_network_history")}
    assert len(set(batches)) == len(batches) and {table for table, _ in batches} == tables, batches


def test_a_client_stopped_past_its_lease_records_nothing_when_it_resumes(
    connect_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer stops (SIGSTOP) while it holds the lock; its process still exists, so the lease
    decides: this client waits for it to lapse, takes the lock and records the id the stopped
    one had read. Continued, the stopped writer learns it lost the lock before it writes, and
    its record under the taken id fails as a whole."""
    spark, schema, lease = session(connect_url), unique_schema("stalled"), 12
    spark.sql(f"create schema if not exists `{schema}`")
    lock, transactions = f"`{schema}`.`lakehistory_transactions_writer`", f"`{schema}`.`lakehistory_transactions`"
    ensure_transactions_table(spark, transactions)
    tests = str(Path(__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    stalled = subprocess.Popen(  # noqa: S603 - this venv's Python on this test's script
        [sys.executable, str(STALLED_WRITER), connect_url, lock, transactions, str(lease)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        first = stalled.stdout.readline()
        assert "holding the lock, next id 1" in first, first + stalled.stdout.read()
        stat = Path(f"/proc/{stalled.pid}/stat")
        while stat.read_text().split(")")[1].split()[0] != "T":  # stopped
            time.sleep(0.05)
        monkeypatch.setattr(lock_module, "LEASE_SECONDS", lease)
        monkeypatch.setattr(lock_module, "RENEW_SECONDS", lease // 4)
        said: list[str] = []
        monkeypatch.setattr(lock_module, "say", said.append)
        lock_module.hold(spark, lock, wait_seconds=120)
        assert said and f"pid {stalled.pid} " in said[0] and "Waiting" in said[0], said
        ledger.insert_transactions(spark, transactions, spark.sql(transaction_rows(1, history="taker")), 1)
        lock_module.let_go_all()
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    output = first + stalled.communicate(timeout=120)[0]
    assert stalled.returncode == 0, output
    assert "check_held: This run held the writer lock" in output and "past its lease" in output, output
    assert "recording: Another writer recorded transactions" in output, output
    recorded = [(r.txn_id, r.history_table) for r in spark.table(transactions).collect()]
    assert recorded == [(1, "taker")], recorded
