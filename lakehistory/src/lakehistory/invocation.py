"""One dbt invocation's state in this process, in one object.

A dbt invocation calls the engine many times, from several threads: each model's staging,
apply and post-hook, each capture. What its first calls read or learn and its later calls
reuse is kept in its Invocation: the project's history tables (the macros walk dbt's graph
once), and a part per module that keeps something (`part`): the landing read once for every
table (landing/run_reads.py), what the recoveries recorded and the first idle check read
(history/writer.py), the transactions tables checked (history/transactions.py), the syncs of the
extracts staged (landing/extracts.py), the history tables of the derived models compiled
(derived.py). Each part's class lives in the module that keeps it, so this module, which every
layer imports, imports none of them. The door looks the invocation up once per call (`of`) and
hands it down whole (with the writer: history/writer.py).

A process runs one dbt invocation at a time: a call of another invocation starts afresh, and
the last one's state goes. A call that names no invocation (the engine called by a test or a
script, not by dbt) gets a state of its own, which lives as long as the caller keeps it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

Part = TypeVar("Part")


@dataclass(frozen=True)
class Project:
    """What the macros walk dbt's graph for (`lakehistory._engine_project`): the history tables
    of the project and the nodes feature states are built from. The graph is the same for every
    call of an invocation, and a walk of it per call grows with the square of the project's
    models: the first call of an invocation sends it, and the invocation keeps it for the others."""

    history_tables: tuple[str, ...]
    feature_state_inputs: frozenset[str]


@dataclass(eq=False)
class Invocation:
    """What the calls of dbt invocation `id` share."""

    id: str
    project: Project | None = None
    # held while a part is made or changed; a module's part may be read and changed by dbt threads at once
    mutex: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _parts: dict[type[Any], Any] = field(default_factory=dict, repr=False)

    @property
    def kept(self) -> bool:
        """Whether its state outlives one call: it is a dbt invocation's."""
        return bool(self.id)

    def part(self, kind: type[Part]) -> Part:
        """The invocation's part of class `kind` (a class of the module that keeps it, made
        with no arguments the first time it is asked for)."""
        with self.mutex:
            if kind not in self._parts:
                self._parts[kind] = kind()
            return cast(Part, self._parts[kind])


_mutex = threading.Lock()
_current: Invocation | None = None


def of(invocation_id: str) -> Invocation:
    """The state of dbt invocation `invocation_id` in this process; a new one when the process's
    last invocation was another (its state goes) or when no invocation is named."""
    global _current
    if not invocation_id:
        return Invocation("")
    with _mutex:
        if _current is None or _current.id != invocation_id:
            _current = Invocation(invocation_id)
        return _current


def known(invocation_id: str) -> Invocation | None:
    """The state of `invocation_id` if this process keeps it, without starting one."""
    with _mutex:
        return _current if _current is not None and invocation_id and _current.id == invocation_id else None


def say(message: str) -> None:
    """A line in the invocation's dbt output (dbt's adapter logger), or in Python's log outside dbt."""
    try:
        from dbt.adapters.events.logging import AdapterLogger

        AdapterLogger("lakehistory").info(message)
    except ImportError:
        logging.getLogger("lakehistory").warning(message)
