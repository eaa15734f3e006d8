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
(history/writer.py: `recovered_batches`). A run applies the batches landed when its first model
staged. The answers are the invocation's (invocation.py), kept for its later calls.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from lakehistory.invocation import Invocation

from .manifests import Landed, read_landed
from .spec import BatchError, batch_error
from .syncs import SyncOf, gather

# The other dbt threads wait for the first one's reads rather than repeat them.
_lock = threading.Lock()

Stream = tuple[str, str, str | None]  # landing root, table, history table


@dataclass
class Answers:
    """An invocation's part (invocation.py), per transactions table: the answer of every landed
    table its first staging read (each taken once), and the syncs of the batches pending then."""

    landed: dict[str | None, dict[Stream, Landed | BatchError]] = field(default_factory=dict)
    syncs: dict[str | None, dict[str, SyncOf]] = field(default_factory=dict)


def known(invocation: Invocation) -> bool:
    """For `lakehistory.landing_batches` (lakehistory.door): whether this invocation's first staging has
    read the landing (the macro then sends no table list). No statement runs."""
    with _lock:
        return invocation.kept and bool(invocation.part(Answers).landed)


def landed(
    spark: SparkSession,
    invocation: Invocation,
    transactions: str | None,
    landing_root: str,
    table: str,
    run_tables: Sequence[Sequence[str]],
    history: str | None = None,
    project_tables: Sequence[Sequence[str]] = (),
) -> Landed | None:
    """`table`'s answer as the history table `history` applies it (None: any), read with those of
    every table of `run_tables` ([landing root, table, history table or ''] triples) by the
    invocation's first call; None when there is none to take (the caller reads the table alone).
    Raises the BatchError of a table whose manifests are bad. `project_tables`: [landing root,
    table, kind] of every landed table the project applies ('batches' or 'extract'), sent with
    `run_tables`; the pending syncs of the tables a run's syncs name are read with its own."""
    if not invocation.kept:
        return None
    read = invocation.part(Answers)
    with _lock:
        if transactions not in read.landed:
            if not run_tables:
                return None
            streams = {(str(t[0]), str(t[1]), (str(t[2]) if len(t) > 2 else "") or None) for t in run_tables}
            project = {(str(t[0]), str(t[1])): str(t[2]) for t in project_tables}
            read.landed[transactions], read.syncs[transactions] = _read(spark, transactions, streams, project)
        found = read.landed[transactions].pop((landing_root, table, history or None), None)
    if isinstance(found, BatchError):
        raise found
    return found


def pending_syncs(invocation: Invocation, transactions: str | None) -> dict[str, SyncOf]:
    """The syncs of every batch the invocation's landed tables had pending when its first staging
    read them (empty when none did): a sync's id is reserved with those of the syncs before it."""
    with _lock:
        return dict(invocation.part(Answers).syncs.get(transactions, {}))


def _read(
    spark: SparkSession, transactions: str | None, streams: set[Stream], project: Mapping[tuple[str, str], str]
) -> tuple[dict[Stream, Landed | BatchError], dict[str, SyncOf]]:
    answers: dict[Stream, Landed | BatchError] = {}
    for root in sorted({root for root, _, _ in streams}):
        asked = [(name, history) for r, name, history in streams if r == root]
        for (name, history), found in read_landed(spark, transactions, root, asked).items():
            answers[(root, name, history)] = found
    pending = {key: _pending(found) for key, found in answers.items() if not isinstance(found, BatchError)}
    refused = _read_beside(spark, transactions, pending, project) if project else {}
    syncs, errors = gather(pending)
    return {key: refused.get(key) or errors.get(key) or found for key, found in answers.items()}, syncs


def _pending(found: Landed) -> list[dict[str, Any]]:
    return [m for m in found.manifests if m.get("batch_id") not in found.applied.batch_ids]


def _read_beside(
    spark: SparkSession,
    transactions: str | None,
    pending: dict[Stream, list[dict[str, Any]]],
    project: Mapping[tuple[str, str], str],
) -> dict[Stream, BatchError]:
    """Add to `pending` the pending manifests of the tables the run's syncs name that it does not
    stage itself (a run of some models only: `dbt run --select`, a schedule per table), so that
    their syncs are reserved with the run's, in sync order: ids then follow the syncs' order,
    whatever a run selects. A sync is one source's: its tables are under the landing root of the
    batch that names it. Returns the error of each run's stream that has a batch of a sync
    naming a table the project does not apply (its transaction would never be whole) or whose
    landing cannot be read (its earlier syncs are unknown)."""
    refused: dict[Stream, BatchError] = {}
    own = set(pending)
    staged = {(root, table) for root, table, _ in pending}
    beside_read: set[tuple[str, str]] = set()
    for _ in range(10):  # a table beside may name syncs of further tables
        wanted: dict[tuple[str, str], list[tuple[Stream, dict[str, Any]]]] = {}
        for key, manifests in pending.items():
            for manifest in manifests:
                tables = (manifest.get("sync") or {}).get("tables")
                for table in tables if isinstance(tables, list) else ():
                    if isinstance(table, str) and (key[0], table) not in staged | beside_read:
                        wanted.setdefault((key[0], table), []).append((key, manifest))
        to_read = sorted(t for t in wanted if project.get(t) == "batches")
        for (root, table), namers in wanted.items():
            if project.get((root, table)) is None:
                for key, manifest in namers:
                    if key in own:
                        refused.setdefault(key, _unapplied(manifest, table, root))
        beside_read.update(wanted)
        if not to_read:
            return refused
        for root in sorted({root for root, _ in to_read}):
            found = read_landed(spark, transactions, root, [(t, None) for r, t in to_read if r == root])
            for (table, _), landed in found.items():
                if isinstance(landed, BatchError):
                    for key, manifest in wanted[(root, table)]:
                        if key in own:
                            refused.setdefault(key, _unknown(manifest, table, landed))
                else:
                    pending[(root, table, None)] = _pending(landed)
    return refused


def _unapplied(manifest: dict[str, Any], table: str, root: str) -> BatchError:
    return batch_error(
        manifest["_folder_name"],
        f"belongs to sync {manifest['sync'].get('id')}, which names table {table!r}, but no history model or snapshot"
        f" of the project reads {table} from {root}: the sync's transaction would never be whole. Add a model"
        " of it, or land the sync without it",
    )


def _unknown(manifest: dict[str, Any], table: str, refusal: BatchError) -> BatchError:
    return batch_error(
        manifest["_folder_name"],
        f"belongs to sync {manifest['sync'].get('id')}, which names table {table!r}, whose landing cannot be read"
        f" ({refusal}): its earlier syncs must be known before this sync's id is reserved. Repair that batch",
    )
