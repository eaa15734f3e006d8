"""A dbt invocation's state (lakehistory.invocation): one object per invocation, each module's
part in it, a new one when the process's invocation changes. No Spark."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from lakehistory import invocation as invocations
from lakehistory.invocation import Invocation


@dataclass
class Seen:
    tables: set[str] = field(default_factory=set)


@pytest.fixture(autouse=True)
def no_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invocations, "_current", None)


def test_the_calls_of_one_invocation_share_its_state_and_the_next_invocation_starts_afresh() -> None:
    first = invocations.of("run-1")
    first.part(Seen).tables.add("a")
    assert invocations.of("run-1") is first
    assert invocations.known("run-1") is first
    assert invocations.of("run-1").part(Seen).tables == {"a"}

    second = invocations.of("run-2")
    assert second is not first and second.part(Seen).tables == set()
    assert invocations.known("run-1") is None, "one invocation at a time per process"
    assert first.part(Seen).tables == {"a"}, "a caller that holds the last invocation keeps what it had"


def test_a_call_without_an_invocation_gets_a_state_of_its_own_that_nothing_keeps() -> None:
    kept = invocations.of("run-1")
    unnamed = invocations.of("")
    assert not unnamed.kept and kept.kept
    assert invocations.of("") is not unnamed
    assert invocations.known("") is None
    assert invocations.known("run-1") is kept, "an unnamed call leaves the invocation's state alone"


def test_each_module_s_part_is_made_once_even_by_threads_asking_at_once() -> None:
    invocation = Invocation("run-1")
    barrier = threading.Barrier(8)
    parts: list[Seen] = []

    def ask() -> None:
        barrier.wait()
        parts.append(invocation.part(Seen))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(parts) == 8 and all(p is parts[0] for p in parts)
    assert invocation.part(Seen) is parts[0]
