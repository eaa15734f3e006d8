"""Syncs in the landing: a manifest's `sync` says its batch belongs to a sync, the batches (and
extracts) a source delivered together for several tables, and which tables the sync holds; an
extract's `<day>.sync.json` says the same of the extract. The history merge and the snapshot
captures record a sync as one transaction (history/syncs.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from .spec import SAFE_NAME, BatchError, batch_error, conform, is_plain_name

SYNC_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("sequence", LongType()),
        StructField("tables", ArrayType(StringType())),
    ]
)
# An extract's sync (`<day>.sync.json`): an extract has no manifest to say who made it.
SIDECAR_SCHEMA = StructType(
    [*SYNC_SCHEMA.fields, StructField("author", StringType()), StructField("app_id", StringType())]
)


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
    def of(cls, sync: Mapping[str, Any] | None, author: str | None, app_id: str | None) -> SyncOf | None:
        """The sync of a manifest (its `sync`, `author` and `app_id`), or of a staged batch."""
        if not sync or not sync.get("id"):
            return None
        return cls(sync["id"], int(sync["sequence"]), tuple(sorted(sync["tables"] or ())), author, app_id)


K = TypeVar("K", str, tuple[str, str, str | None])


def gather(pending: Mapping[K, Iterable[dict[str, Any]]]) -> tuple[dict[str, SyncOf], dict[K, BatchError]]:
    """The syncs of the pending manifests of each table (a table, or a run's stream of one: its
    manifests), and for a table whose batch names a sync wrongly, or says of a sync what another
    table's batch contradicts, the error to stage it with: a bad manifest is its table's problem."""
    syncs: dict[str, tuple[SyncOf, K, str]] = {}  # sync id: the sync, and the table and batch that said so
    errors: dict[K, BatchError] = {}
    for key in sorted(pending, key=str):
        for manifest in pending[key]:
            try:
                if manifest.get("sync") is not None:
                    folder = str(manifest.get("_folder_name") or manifest.get("batch_id"))
                    check_sync(folder, "manifest.json", manifest["sync"], _name(key))
                sync = SyncOf.of(manifest.get("sync"), manifest.get("author"), manifest.get("app_id"))
            except BatchError as exc:
                errors.setdefault(key, exc)
                continue
            if sync is None:
                continue
            first = syncs.setdefault(sync.id, (sync, key, manifest["batch_id"]))
            if first[0] != sync:
                error = batch_error(
                    manifest["batch_id"],
                    f"says sync {sync.id} holds tables {list(sync.tables)} with sequence {sync.sequence}, author"
                    f" {sync.author!r} and app {sync.app_id!r}; batch {first[2]} of {_name(first[1])} says"
                    f" {list(first[0].tables)}, {first[0].sequence}, {first[0].author!r} and {first[0].app_id!r}."
                    " Every batch of a sync must say the same of it",
                )
                errors.setdefault(key, error)
                errors.setdefault(first[1], error)
    return {sync_id: found[0] for sync_id, found in syncs.items()}, errors


def _name(key: str | tuple[str, str, str | None]) -> str:
    """The landed table's name of a table or stream (landing root, table, history table)."""
    return key if isinstance(key, str) else key[1]


def check_sync(folder: str, where: str, sync: dict[str, Any], table: str) -> None:
    """A sync as a manifest (or an extract's sync file, `where`) of `table` gives it."""
    if not sync.get("id") or not SAFE_NAME.match(sync["id"]):
        raise batch_error(folder, f"{where}: sync needs an 'id' of letters, digits and _ . = -")
    if sync.get("sequence") is None or sync["sequence"] < 0:
        raise batch_error(folder, f"{where}: sync {sync['id']} needs a 'sequence', a whole number from 0 on")
    tables = sync.get("tables") or []
    if not all(is_plain_name(t) for t in tables) or len(set(tables)) < len(tables):
        raise batch_error(
            folder, f"{where}: sync {sync['id']}'s 'tables' must name each landed table once, not {tables}"
        )
    if table not in tables:
        raise batch_error(folder, f"{where}: sync {sync['id']} lists tables {tables}, but not this one, {table!r}")


def parse_sidecar(name: str, content: bytes, table: str) -> SyncOf:
    """The sync of an extract, from its sync file `name`; a BatchError says what is wrong."""
    try:
        body = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise batch_error(f"{table}/{name}", f"is not UTF-8 JSON: {exc}") from None
    sync = conform(f"{table}/{name}", name, body, SIDECAR_SCHEMA)
    check_sync(f"{table}/{name}", name, sync, table)
    found = SyncOf.of(sync, sync["author"], sync["app_id"])
    assert found is not None  # check_sync wants an id
    return found
