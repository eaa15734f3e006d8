"""Where the test suite's time goes: dbt's own work against the engine's, per test group.

    .local/venv/bin/python -m pytest -p lakehistory_tools.suite_costs -m "not connect and not slow" -n 2 \
        --dist loadgroup --no-loadscope-reorder
    .local/venv/bin/python -m lakehistory_tools.suite_costs        # the table of the last run
    .local/venv/bin/python -m lakehistory_tools.suite_costs --group-seconds   # conftest.py's GROUP_SECONDS

A pytest plugin: each test process appends, per test, its time (setup, call and teardown), the
dbt invocations it made (how many, and their seconds), and the seconds its Python threads waited
on the JVM (the wall-clock time in which at least one py4j call was in flight: Spark's planning
and jobs, Delta's log and commits), inside dbt invocations and outside them, to
`.local/test-artifacts/suite_costs.jsonl`. The table sums them per group (conftest.py's xdist
groups). An invocation's seconds less its JVM seconds are those in which no thread waited on the
JVM: dbt's own work and the product's Python.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lakehistory.runtime.paths import local_home


def _log() -> Path:
    return local_home() / "test-artifacts" / "suite_costs.jsonl"


class _Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0  # py4j calls in flight, on any thread
        self.reset()

    def reset(self) -> None:
        """Counts for the next test; a call in flight (a thread of an earlier test's) counts from now."""
        with self.lock:
            self.since = time.perf_counter()
            self.invocations = 0
            self.dbt_seconds = 0.0
            self.jvm_in_dbt = 0.0
            self.jvm_outside = 0.0

    def call_starts(self) -> None:
        with self.lock:
            if not self.calls:
                self.since = time.perf_counter()
            self.calls += 1

    def call_ends(self) -> None:
        with self.lock:
            self.calls = max(0, self.calls - 1)
            if self.calls:
                return
            seconds = time.perf_counter() - self.since
            if _in_dbt.depth:
                self.jvm_in_dbt += seconds
            else:
                self.jvm_outside += seconds


class _InDbt:
    """Whether a dbt invocation runs in this process (its threads are dbt's)."""

    depth = 0


_in_dbt = _InDbt()
_tally = _Tally()


def _install() -> None:
    from dbt.cli.main import dbtRunner
    from py4j.clientserver import ClientServerConnection

    send = ClientServerConnection.send_command

    def timed_send(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        _tally.call_starts()
        try:
            return send(self, command, *args, **kwargs)
        finally:
            _tally.call_ends()

    ClientServerConnection.send_command = timed_send  # type: ignore[method-assign]
    invoke = dbtRunner.invoke

    def timed_invoke(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        _in_dbt.depth += 1
        try:
            return invoke(self, *args, **kwargs)
        finally:
            _in_dbt.depth -= 1
            with _tally.lock:
                _tally.invocations += 1
                _tally.dbt_seconds += time.perf_counter() - started

    dbtRunner.invoke = timed_invoke  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    _install()
    if not hasattr(config, "workerinput"):  # the controller (or a run of one process) starts the log
        _log().parent.mkdir(parents=True, exist_ok=True)
        _log().write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    _tally.reset()
    started = time.perf_counter()
    yield
    group = next((m.args[0] for m in item.iter_markers("xdist_group")), item.nodeid.split("::")[0])
    row = {
        "test": item.nodeid,
        "group": group,
        "seconds": round(time.perf_counter() - started, 2),
        "invocations": _tally.invocations,
        "dbt_seconds": round(_tally.dbt_seconds, 2),
        "jvm_in_dbt": round(_tally.jvm_in_dbt, 2),
        "jvm_outside": round(_tally.jvm_outside, 2),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with _log().open("a") as out:
        out.write(json.dumps(row) + "\n")


def table(rows: list[dict[str, Any]]) -> str:
    groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        g = groups[r["group"]]
        g["tests"] += 1
        for key in ("seconds", "invocations", "dbt_seconds", "jvm_in_dbt", "jvm_outside"):
            g[key] += r[key]
    lines = [
        f"{'group':58} {'tests':>5} {'seconds':>8} {'dbt inv':>7} {'in dbt':>8} {'jvm in':>7}"
        f" {'dbt-jvm':>7} {'outside':>8} {'jvm out':>7}"
    ]
    total: dict[str, float] = defaultdict(float)
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1]["seconds"]):
        outside = g["seconds"] - g["dbt_seconds"]
        lines.append(
            f"{name[-58:]:58} {int(g['tests']):5} {g['seconds']:8.0f} {int(g['invocations']):7} {g['dbt_seconds']:8.0f}"
            f" {g['jvm_in_dbt']:7.0f} {g['dbt_seconds'] - g['jvm_in_dbt']:7.0f} {outside:8.0f} {g['jvm_outside']:7.0f}"
        )
        for key, value in g.items():
            total[key] += value
    lines.append(
        f"{'all':58} {int(total['tests']):5} {total['seconds']:8.0f} {int(total['invocations']):7}"
        f" {total['dbt_seconds']:8.0f} {total['jvm_in_dbt']:7.0f} {total['dbt_seconds'] - total['jvm_in_dbt']:7.0f}"
        f" {total['seconds'] - total['dbt_seconds']:8.0f} {total['jvm_outside']:7.0f}"
    )
    return "\n".join(lines)


def group_seconds(rows: list[dict[str, Any]]) -> str:
    """conftest.py's GROUP_SECONDS from a run: every group of a test that ran 5 s or more, its
    seconds rounded up to 5, longest first."""
    seconds: dict[str, float] = defaultdict(float)
    for r in rows:
        seconds[r["group"]] += r["seconds"]
    lines = [
        f'    "{name}": {int(-(-total // 5) * 5)},'
        for name, total in sorted(seconds.items(), key=lambda kv: -kv[1])
        if total >= 5
    ]
    return "GROUP_SECONDS = {\n" + "\n".join(lines) + "\n}"


def main() -> None:
    rows = [json.loads(line) for line in _log().read_text().splitlines() if line.strip()]
    print(group_seconds(rows) if sys.argv[1:] == ["--group-seconds"] else table(rows))


if __name__ == "__main__":
    main()
