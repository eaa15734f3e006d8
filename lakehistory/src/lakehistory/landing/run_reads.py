"""What one dbt invocation reads once for every landed table it stages.

A sync is many history models in one `dbt run`, and each model's staging asks the same two
questions: which batches are landed (the manifests) and which of them the transactions table
records as applied. Asked per model, that is two listings of the landing and one read of the
transactions table per model, and each of those reads rebuilds the transactions table's Delta
state, which every model's commit changes. Here the first staging of an invocation answers both
for every landed table the invocation selected, in one listing per landing root and one aggregate
of the transactions table; each model's staging then takes its table's answer.

An answer is taken once: a second staging of the same table in the same invocation (after its
model applied, say) reads again. A batch recorded after the answer was read by a recovery of this
process (a commit a killed run left unrecorded) is dropped again before it is applied
(apply.py: `recovered_batches`). A run applies the batches landed when its first model staged.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from .manifests import Applied, applied_batches_for, landed_ids, read_landed
from .spec import BatchError
from .syncs import SyncOf, gather


@dataclass(frozen=True)
class Landed:
    """A table's landed manifests and what the transactions table says of them."""

    manifests: list[dict[str, Any]]
    applied: Applied


_lock = threading.Lock()
# (invocation id, transactions table) -> (landing root, table) -> its answer, or its manifests' error.
_runs: dict[tuple[str, str | None], dict[tuple[str, str], Landed | BatchError]] = {}
# (invocation id, transactions table) -> the syncs of the batches pending when the landing was read.
_syncs: dict[tuple[str, str | None], dict[str, SyncOf]] = {}


def known(spark: SparkSession, invocation_id: str) -> bool:
    """For `lakehistory.landing_batches` (lakehistory.door): whether this invocation's first staging has
    read the landing (the macro then sends no table list). No statement runs."""
    with _lock:
        return any(run == invocation_id for run, _ in _runs)


def landed(
    spark: SparkSession,
    invocation_id: str,
    transactions: str | None,
    landing_root: str,
    table: str,
    run_tables: Sequence[Sequence[str]],
) -> Landed | None:
    """`table`'s answer, read with those of every table of `run_tables` ([landing root, table]
    pairs) by the invocation's first call; None when there is none to take (the caller reads the
    table alone). Raises the BatchError of a table whose manifests are bad."""
    if not invocation_id:
        return None
    key = (invocation_id, transactions)
    with _lock:  # the other dbt threads wait for the first one's reads rather than repeat them
        if key not in _runs:
            if not run_tables:
                return None
            _runs.clear()  # one invocation at a time per process: the last one's answers are stale
            _syncs.clear()
            _runs[key], _syncs[key] = _read(spark, transactions, {(str(root), str(name)) for root, name in run_tables})
        found = _runs[key].pop((landing_root, table), None)
    if isinstance(found, BatchError):
        raise found
    return found


def pending_syncs(invocation_id: str, transactions: str | None) -> dict[str, SyncOf]:
    """The syncs of every batch the invocation's landed tables had pending when its first staging
    read them (empty when none did): a sync's id is reserved with those of the syncs before it."""
    with _lock:
        return dict(_syncs.get((invocation_id, transactions), {}))


def _read(
    spark: SparkSession, transactions: str | None, tables: set[tuple[str, str]]
) -> tuple[dict[tuple[str, str], Landed | BatchError], dict[str, SyncOf]]:
    manifests: dict[tuple[str, str], list[dict[str, Any]] | BatchError] = {}
    for root in sorted({root for root, _ in tables}):
        for name, found in read_landed(spark, root, [name for r, name in tables if r == root]).items():
            manifests[(root, name)] = found
    ids: dict[str, list[str]] = {}
    for (_, name), found in manifests.items():
        ids.setdefault(name, []).extend([] if isinstance(found, BatchError) else landed_ids(found))
    applied = applied_batches_for(spark, transactions, ids)
    pending = {
        name: [m for m in found if m.get("batch_id") and m["batch_id"] not in applied[name].batch_ids]
        for (_, name), found in manifests.items()
        if not isinstance(found, BatchError)
    }
    syncs, contradictions = gather(pending)
    answers = {
        (root, name): contradictions.get(name)
        or (found if isinstance(found, BatchError) else Landed(found, applied[name]))
        for (root, name), found in manifests.items()
    }
    return answers, syncs
