"""`lakehistory destination` as a process, as it runs beside dbt: killed in the middle of a
request it has landed nothing, and the retry lands once; asked to stop, it finishes the request
in flight first."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
import zstandard
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_requests import ORDERS, T0, answer, batch_folders, incoming

from lakehistory_tools.fivetran_tester import FivetranConnection, history_files

ROWS = 200_000  # a file the server takes a second or more to land: time to stop it halfway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def destination(landing: Path) -> Iterator[tuple[subprocess.Popen, FivetranConnection]]:
    """The command a user runs, and Fivetran's side of a connection to it once it is healthy."""
    port = free_port()
    command = [sys.executable, "-m", "lakehistory.command.cli", "destination", "--host", "127.0.0.1"]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.PIPE, text=True)  # noqa: S603 - this venv
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=60)
            check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            yield process, FivetranConnection(channel, {"landing_root": str(landing)})
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def big_batch() -> dict:
    rows = [{"id": i, "note": f"note {i}", "op_time": "2024-06-01T00:00:00Z"} for i in range(ROWS)]
    return history_files(ORDERS, "upsert", rows, T0)


def halfway(landing: Path) -> None:
    """Wait until the request in flight has begun its batch's first data file."""
    deadline = time.monotonic() + 60
    while not any(folder.iterdir() for folder in incoming(landing)):
        assert time.monotonic() < deadline, "the request never began its batch"
        time.sleep(0.002)


def landed_rows(landing: Path) -> int:
    [batch] = batch_folders(landing, "orders")
    data = (landing / "tester" / "orders" / batch / "replace_0.csv.zst").read_bytes()
    return zstandard.ZstdDecompressor().decompressobj().decompress(data).count(b"\n") - 1


def test_a_server_killed_during_a_request_lands_nothing_and_the_retry_lands_once(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    files = big_batch()
    with destination(landing) as (process, fivetran), ThreadPoolExecutor(1) as pool:
        fivetran.define("create_table", ORDERS)
        request = pool.submit(fivetran.send, ORDERS, files, T0)
        halfway(landing)
        process.kill()
        with pytest.raises(grpc.RpcError):
            request.result(timeout=60)
    assert batch_folders(landing, "orders") == []  # a dbt run now finds nothing of it
    with destination(landing) as (_, fivetran):
        for _ in range(2):  # Fivetran retries; a second retry finds the batch landed
            assert answer(fivetran.send(ORDERS, files, T0)) == ("success", "True")
        assert incoming(landing) == []
    assert landed_rows(landing) == ROWS


def test_a_stop_finishes_the_request_in_flight(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    with destination(landing) as (process, fivetran), ThreadPoolExecutor(1) as pool:
        fivetran.define("create_table", ORDERS)
        request = pool.submit(fivetran.send, ORDERS, big_batch(), T0)
        halfway(landing)
        process.send_signal(signal.SIGTERM)
        assert answer(request.result(timeout=120)) == ("success", "True")
        assert process.wait(timeout=60) == 0
        log = process.stdout.read() if process.stdout else ""
    assert "stopping (SIGTERM): finishing requests" in log and "lakehistory destination stopped" in log
    assert landed_rows(landing) == ROWS
