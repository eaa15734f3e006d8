"""What one dbt invocation reads once for every landed table it stages.

A sync is many history models in one `dbt run`, and each model's staging asks the same two
questions: which batches are landed (the manifests) and which of them the transactions table
records as applied. Asked per model, that is two listings of the landing and one read of the
transactions table per model, and each of those reads rebuilds the transactions table's Delta
state, which every model's commit changes. Here the first staging of an invocation answers both
for every landed table the invocation selected, in one listing of each table's folder, one aggregate
of the transactions table and one read of the pending batches' manifests (manifests.read_landed);
each model's staging then takes its table's answer.

An answer is taken once: a second staging of the same table in the same invocation (after its
model applied, say) reads again. A batch recorded after the answer was read by a recovery of this
process (a commit a killed run left unrecorded) is dropped again before it is applied
(apply.py: `recovered_batches`). A run applies the batches landed when its first model staged.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pyspark.sql import SparkSession

from .manifests import Landed, read_landed
from .spec import BatchError
from .syncs import SyncOf, gather

_lock = threading.Lock()
# (invocation id, transactions table) -> (landing root, table, history table) -> its answer, or its
# manifests' error (manifests.Stream: what is applied is each history table's own record).
_runs: dict[tuple[str, str | None], dict[tuple[str, str, str | None], Landed | BatchError]] = {}
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
    history: str | None = None,
) -> Landed | None:
    """`table`'s answer as the history table `history` applies it (None: any), read with those of
    every table of `run_tables` ([landing root, table, history table or ''] triples) by the
    invocation's first call; None when there is none to take (the caller reads the table alone).
    Raises the BatchError of a table whose manifests are bad."""
    if not invocation_id:
        return None
    key = (invocation_id, transactions)
    with _lock:  # the other dbt threads wait for the first one's reads rather than repeat them
        if key not in _runs:
            if not run_tables:
                return None
            _runs.clear()  # one invocation at a time per process: the last one's answers are stale
            _syncs.clear()
            streams = {(str(t[0]), str(t[1]), (str(t[2]) if len(t) > 2 else "") or None) for t in run_tables}
            _runs[key], _syncs[key] = _read(spark, transactions, streams)
        found = _runs[key].pop((landing_root, table, history or None), None)
    if isinstance(found, BatchError):
        raise found
    return found


def pending_syncs(invocation_id: str, transactions: str | None) -> dict[str, SyncOf]:
    """The syncs of every batch the invocation's landed tables had pending when its first staging
    read them (empty when none did): a sync's id is reserved with those of the syncs before it."""
    with _lock:
        return dict(_syncs.get((invocation_id, transactions), {}))


def _read(
    spark: SparkSession, transactions: str | None, streams: set[tuple[str, str, str | None]]
) -> tuple[dict[tuple[str, str, str | None], Landed | BatchError], dict[str, SyncOf]]:
    answers: dict[tuple[str, str, str | None], Landed | BatchError] = {}
    for root in sorted({root for root, _, _ in streams}):
        asked = [(name, history) for r, name, history in streams if r == root]
        for (name, history), found in read_landed(spark, transactions, root, asked).items():
            answers[(root, name, history)] = found
    pending = {
        key: [m for m in found.manifests if m.get("batch_id") not in found.applied.batch_ids]
        for key, found in answers.items()
        if not isinstance(found, BatchError)
    }
    syncs, errors = gather(pending)
    return {key: errors.get(key) or found for key, found in answers.items()}, syncs
