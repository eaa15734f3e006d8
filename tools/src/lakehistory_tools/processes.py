"""The servers the tests and the benchmark start on 127.0.0.1 (an object store, a Spark cluster):
a free port for each, waiting until one is ready, stopping it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(what: str, ready: Callable[[], bool], log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except OSError:
            pass  # not listening yet
        time.sleep(1)
    raise RuntimeError(f"{what} not ready within {seconds:.0f} s; see {log}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
