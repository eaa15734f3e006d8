"""Syncs in the landing: a manifest's `sync` says its batch belongs to a sync, the batches (and
extracts) a source delivered together for several tables, and which tables the sync holds. The
history merge records a sync's batches as one transaction (history/syncs.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .spec import BatchError, batch_error


@dataclass(frozen=True)
class SyncOf:
    """A sync as its batches name it. Every batch of a sync says the same of it: its order, its
    tables, and who made it (author, app), which its transaction records once for all tables."""

    id: str
    sequence: int
    tables: tuple[str, ...]
    author: str | None
    app_id: str | None

    @classmethod
    def of(cls, sync: Mapping | None, author: str | None, app_id: str | None) -> SyncOf | None:
        """The sync of a manifest (its `sync`, `author` and `app_id`), or of a staged batch."""
        if not sync or not sync.get("id"):
            return None
        return cls(sync["id"], int(sync["sequence"]), tuple(sorted(sync["tables"] or ())), author, app_id)


def gather(pending: Mapping[str, Iterable[dict]]) -> tuple[dict[str, SyncOf], dict[str, BatchError]]:
    """The syncs of the pending manifests of each table (table: its manifests), and for a table
    whose batch says of a sync what another table's batch contradicts, the error to stage it with."""
    syncs: dict[str, tuple[SyncOf, str, str]] = {}  # sync id: the sync, and the table and batch that said so
    errors: dict[str, BatchError] = {}
    for table in sorted(pending):
        for manifest in pending[table]:
            sync = SyncOf.of(manifest.get("sync"), manifest.get("author"), manifest.get("app_id"))
            if sync is None:
                continue
            first = syncs.setdefault(sync.id, (sync, table, manifest["batch_id"]))
            if first[0] != sync:
                error = batch_error(
                    manifest["batch_id"],
                    f"says sync {sync.id} holds tables {list(sync.tables)} with sequence {sync.sequence}, author"
                    f" {sync.author!r} and app {sync.app_id!r}; batch {first[2]} of {first[1]} says"
                    f" {list(first[0].tables)}, {first[0].sequence}, {first[0].author!r} and {first[0].app_id!r}."
                    " Every batch of a sync must say the same of it",
                )
                errors.setdefault(table, error)
                errors.setdefault(first[1], error)
    return {sync_id: found[0] for sync_id, found in syncs.items()}, errors
