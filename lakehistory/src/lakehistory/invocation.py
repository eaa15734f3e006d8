"""One dbt invocation's state in this process, in one object.

A dbt invocation calls the engine many times, from several threads: each model's staging,
apply and post-hook, each capture. What its first calls read or learn and its later calls
reuse is kept here: the project's history tables (the macros walk dbt's graph once), the
landing read once for every table, the batches a recovery recorded, what the transactions table
held at the first idle check. The door looks the invocation up once per call (`of`) and hands
it down whole (with the writer: history/writer.py). Nothing else of the engine keeps state
between the calls of an invocation, but the writer lock's hold (history/lock.py), which is the
process's.

A process runs one dbt invocation at a time: a call of another invocation starts afresh, and
the last one's state goes. A call that names no invocation (the engine called by a test or a
script, not by dbt) gets a state of its own, which lives as long as the caller keeps it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakehistory.derived import Derived
    from lakehistory.history.ledger import Recorded
    from lakehistory.landing.manifests import Landed
    from lakehistory.landing.spec import BatchError
    from lakehistory.landing.syncs import SyncOf

# A batch a recovery recorded: (history table, source table, batch id).
RecoveredBatch = tuple[str, "str | None", "str | None"]
# A landed table as a run reads it: (landing root, table, history table that applies it or None).
Stream = tuple[str, str, "str | None"]


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
    """What the calls of dbt invocation `id` share. Per transactions table where a project could
    name two (a `lakehistory_transactions` var per model)."""

    id: str
    project: Project | None = None
    # transactions tables whose table and syncs table were checked (transactions.ensure_...)
    ensured: set[str] = field(default_factory=set)
    # transactions tables read afresh by a first recovery (compacted, the ledger's cache dropped)
    read_afresh: set[str] = field(default_factory=set)
    # per transactions table: the landing's answers of every table the first staging read
    # (landing/run_reads.py), each taken once, and the syncs of the batches pending then
    landing: dict[str | None, dict[Stream, Landed | BatchError]] = field(default_factory=dict)
    pending_syncs: dict[str | None, dict[str, SyncOf]] = field(default_factory=dict)
    # per transactions table: the batches this invocation's recoveries recorded (history/writer.py)
    recovered: dict[str, set[RecoveredBatch]] = field(default_factory=dict)
    # per transactions table: what it held for every history table at the first idle check
    recorded_at_start: dict[str, dict[str, Recorded]] = field(default_factory=dict)
    # per snapshot: the sync of the extract it captures in this run (landing/extracts.py)
    staged_syncs: dict[str, SyncOf | None] = field(default_factory=dict)
    # per derived table: its history table, named while dbt compiled its model (derived.py)
    compiled: dict[str, Derived] = field(default_factory=dict)
    mutex: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kept(self) -> bool:
        """Whether its state outlives one call: it is a dbt invocation's."""
        return bool(self.id)


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
