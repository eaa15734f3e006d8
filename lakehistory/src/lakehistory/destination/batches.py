"""Each write request Fivetran sends becomes one batch of the landing (docs/landing-format.md),
landed whole or not at all.

A batch is built in a folder of its own under `<landing root>/.lakehistory/incoming/`: its data
files first, its manifest last; then one rename puts it in its table's folder, where a `dbt run`
finds it complete or not at all (on S3, which has no rename, its files are copied there with the
manifest last, and a folder a killed server left without its manifest is removed by the table's
next request). A batch's folder is named `<sequence>-<fingerprint>`, the fingerprint a hash of
what the request asks (its kind, the table, the tokens, and each file's plain bytes, whatever key
encrypted them), so a retried request finds its batch landed and lands nothing more. A request
that fails leaves nothing behind but its incoming folder, which it removes (and the server's
start removes any a killed server left).

- `WriteHistoryBatch`: its files, in kind, as they come: decrypted while they stream, zstd or gzip
  kept (an uncompressed file is compressed with zstd on the way), each checked against the table.
- `WriteBatch` (a table not in history mode): its rows rewritten as history-mode rows, each a
  version starting at its `_fivetran_synced`; an earliest-start file gives each key that start,
  so a key written twice in one sync keeps the later write (docs/landing-format.md).
- `Truncate`: a batch with the manifest's `truncate` and no files.
- `AlterTable`: a batch of `add_column` and `drop_column` schema changes at the request's time.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import hashlib
import io
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import zstandard

from lakehistory.names import ACTIVE, END, START, SYNCED

from .files import BatchFileError, Digest, FileParams, csv_rows, decompressed, decrypted, open_batch_file
from .store import Store
from .tables import (
    FIVETRAN_ID,
    HISTORY_SYSTEM,
    STATE,
    ColumnRecord,
    TableError,
    TableRecord,
    check_columns,
    read_record,
    schema_folder,
    write_record,
)

FORMAT_VERSION = 1  # the landing's manifest format (lakehistory.landing.spec)
OPEN_END = "9999-12-31T23:59:59.999Z"
AUTHOR, APP_ID = "fivetran", "lakehistory destination"
_EXTENSIONS = {"off": ".csv.zst", "zstd": ".csv.zst", "gzip": ".csv.gz"}
EARLIEST_FILE = "earliest_0.csv.zst"
MANIFEST = "manifest.json"
# The tokens a batch without files names (a truncate, a schema change), which no cell reads.
FILELESS_TOKENS = FileParams("off", False, null_string="\\N", unmodified_string="__unmodified__")


@dataclass(frozen=True)
class BatchFile:
    kind: str  # replace, update, delete or earliest
    path: str  # where Fivetran wrote it, on this machine
    key: bytes | None  # its AES key; None when the request says the files are not encrypted


def timestamp_text(moment: dt.datetime) -> str:
    u = moment.astimezone(dt.UTC)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


class _Built:
    """What building a batch produced in its incoming folder."""

    def __init__(self) -> None:
        self.files: list[dict[str, str]] = []
        self.digest = hashlib.sha256()

    def add(self, *parts: str) -> None:
        for part in parts:
            self.digest.update(part.encode("utf-8") + b"\x00")


class Lander:
    """Lands batches and keeps the tables' records under one landing root: one request per table
    at a time, each reading the table's record once it has the table's turn."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.incoming = store.path(STATE, "incoming")
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}

    def turn(self, schema: str, table: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((schema, table), threading.Lock())

    def forget_incoming(self) -> None:
        """Remove what requests a stopped server left half built (none is in flight at its start)."""
        self.store.remove(self.incoming)

    def record(self, schema: str, table: str) -> TableRecord:
        record = read_record(self.store, schema, table)
        if record is None:
            raise TableError(f"table {schema}.{table} is unknown to the destination: CreateTable comes first")
        return record

    # --- the requests ---------------------------------------------------------------------------

    def create(self, wanted: TableRecord) -> None:
        """Record a new table; the same table asked again (a retry) is no error."""
        check_columns(wanted)
        with self.turn(wanted.schema, wanted.name):
            have = read_record(self.store, wanted.schema, wanted.name)
            if have is not None and have.columns != wanted.columns:
                raise TableError(f"table {wanted.schema}.{wanted.name} exists already, with other columns")
            if not wanted.key:
                raise TableError(
                    f"table {wanted.schema}.{wanted.name} has no primary key column (nor {FIVETRAN_ID}): "
                    "a history table keeps the versions of each key"
                )
            if have is None:
                write_record(self.store, wanted)

    def alter(self, wanted: TableRecord) -> list[str]:
        """Land what `wanted` changes as schema changes at this instant, and record it: a column it
        adds (or brings back) is an `add_column`; one it leaves out a `drop_column`, which ends the
        column's values in the history and keeps the column (Fivetran never drops one). A new
        type or key is refused. The changes, as `+column` and `-column`."""
        check_columns(wanted)
        with self.turn(wanted.schema, wanted.name):
            record = self.record(wanted.schema, wanted.name)
            added, dropped = changes_to(record, wanted)
            if added or dropped:
                at = timestamp_text(dt.datetime.now(dt.UTC))
                changes = [{"op": "add_column", "column": c.name, "type": c.spark_type} for c in added]
                changes += [{"op": "drop_column", "column": name} for name in dropped]

                def build(folder: str, built: _Built) -> dict[str, Any]:
                    built.add("schema_changes", json.dumps(changes, sort_keys=True))  # a retry is a twin
                    return {"schema_changes": [{**c, "at": at} for c in changes]}

                self._land(record, build, None, "AlterTable")
                kept = {c.name: c for c in record.columns}
                for c in added:
                    kept[c.name] = dataclasses.replace(c, dropped=False)
                for name in dropped:
                    kept[name] = dataclasses.replace(kept[name], dropped=True)
                record.columns = list(kept.values())
                write_record(self.store, record)
            return [f"+{c.name}" for c in added] + [f"-{name}" for name in dropped]

    def history_batch(self, schema: str, table: str, files: Sequence[BatchFile], params: FileParams) -> str:
        with self.turn(schema, table):
            record = self.record(schema, table)
            if not record.history_mode:
                raise TableError(
                    f"table {schema}.{table} was created without {START}: Fivetran writes it with "
                    "WriteBatch, not in history mode"
                )

            def build(folder: str, built: _Built) -> dict[str, Any]:
                built.add("history", params.null_string, params.unmodified_string)
                for n, f in _numbered(files):
                    built.files.append(_copy_history_file(self.store, record, f, params, folder, n, built))
                return {}

            return self._land(record, build, params, "WriteHistoryBatch")

    def live_batch(self, schema: str, table: str, files: Sequence[BatchFile], params: FileParams) -> str:
        with self.turn(schema, table):
            record = self.record(schema, table)
            if record.history_mode:
                raise TableError(
                    f"table {schema}.{table} is in history mode: Fivetran writes it with WriteHistoryBatch"
                )
            received = timestamp_text(dt.datetime.now(dt.UTC))

            def build(folder: str, built: _Built) -> dict[str, Any]:
                built.add("live", params.null_string, params.unmodified_string)
                with _Writer(self.store, f"{folder}/{EARLIEST_FILE}", [*record.key, START]) as earliest:
                    for n, f in _numbered(files):
                        built.files.append(
                            _rewrite_live_file(self.store, record, f, params, folder, n, built, earliest, received)
                        )
                if earliest.rows:
                    built.files.append({"kind": "earliest", "path": EARLIEST_FILE})
                return {}

            return self._land(record, build, params, "WriteBatch")

    def truncate(self, schema: str, table: str, before: dt.datetime, soft: bool) -> str | None:
        """A batch that truncates the table; None for a table the destination does not have
        (Fivetran asks it of tables that may not exist, and it is no error)."""
        with self.turn(schema, table):
            record = read_record(self.store, schema, table)
            if record is None:
                return None
            # A table kept as history loses no version to a live table's truncate: its rows are
            # closed at the cutoff (soft) whichever Fivetran asks. History mode follows the request.
            mode = "soft" if soft or not record.history_mode else "hard"
            cutoff = timestamp_text(before)

            def build(folder: str, built: _Built) -> dict[str, Any]:
                built.add("truncate", mode, cutoff)
                return {"truncate": {"mode": mode, "before": cutoff}}

            return self._land(record, build, None, f"Truncate ({mode})")

    # --- one batch, whole or not at all -----------------------------------------------------------

    def _land(
        self,
        record: TableRecord,
        build: Callable[[str, _Built], dict[str, Any]],
        params: FileParams | None,
        request: str,
    ) -> str:
        """Build a batch in an incoming folder and move it into its table's folder; the caller has
        the table's turn."""
        table_folder = f"{schema_folder(self.store, record.schema)}/{record.name}"
        folder = f"{self.incoming}/{uuid.uuid4().hex}"
        try:
            built = _Built()
            built.add(record.schema, record.name)
            extra = build(folder, built)
            fingerprint = built.digest.hexdigest()[:16]
            landed = self._whole_batches(table_folder, record)
            twin = next((name for name in landed if name.endswith(f"-{fingerprint}")), None)
            if twin is not None:  # a retried request: its batch is there already
                return twin
            sequence = max([record.last_sequence, *(_sequence_of(name) for name in landed)]) + 1
            batch_id = f"{sequence:06d}-{fingerprint}"
            manifest = {
                "format_version": FORMAT_VERSION,
                "table": record.name,
                "batch_id": batch_id,
                "sequence": sequence,
                "key": record.key,
                "null_string": (params or FILELESS_TOKENS).null_string,
                "unmodified_string": (params or FILELESS_TOKENS).unmodified_string,
                "author": AUTHOR,
                "app_id": APP_ID,
                "commit_message": f"Fivetran {request}",
                "files": built.files,
                **extra,
            }
            self.store.write_text(f"{folder}/{MANIFEST}", json.dumps(manifest, indent=1))
            files = [f["path"] for f in built.files]
            self.store.publish(folder, f"{table_folder}/{batch_id}", [*files, MANIFEST])  # appears whole
        finally:
            self.store.remove(folder)
        record.last_sequence = sequence
        write_record(self.store, record)
        return batch_id

    def _whole_batches(self, table_folder: str, record: TableRecord) -> list[str]:
        """The table's batch folders. On S3, a folder newer than the table's record without its
        manifest is one a killed server was copying into place: removed, its request lands anew."""
        landed = self.store.folders(table_folder)
        if self.store.atomic_rename:
            return landed
        half = [
            n
            for n in landed
            if _sequence_of(n) > record.last_sequence and not self.store.exists(f"{table_folder}/{n}/{MANIFEST}")
        ]
        for name in half:
            self.store.remove(f"{table_folder}/{name}")
        return [n for n in landed if n not in half]


def changes_to(record: TableRecord, wanted: TableRecord) -> tuple[list[ColumnRecord], list[str]]:
    """The columns `wanted` adds (or brings back), and the data columns it leaves out; a column
    whose type or key part changes is refused."""
    table = f"table {record.schema}.{record.name}"
    added = []
    for column in wanted.columns:
        have = record.column(column.name)
        if have is None and (column.primary_key or column.name in HISTORY_SYSTEM):
            raise TableError(
                f"{table}: AlterTable adds {column.name!r} to the primary key or history mode; the "
                "history's versions are kept per key, so a new key or mode takes a new table"
            )
        if have is not None and have.spark_type != column.spark_type:
            raise TableError(
                f"{table}: column {column.name!r} is {have.spark_type} and AlterTable asks {column.spark_type}; "
                "a history table keeps each column's type: bring the values as a new column"
            )
        if have is not None and have.primary_key != column.primary_key:
            raise TableError(
                f"{table}: AlterTable moves column {column.name!r} {'into' if column.primary_key else 'out of'} "
                "the primary key; the history's versions are kept per key, so a new key takes a new table"
            )
        if have is None or have.dropped:
            added.append(column)
    asked = {c.name for c in wanted.columns}
    dropped = [
        c.name for c in record.data_columns if c.name not in asked and not c.dropped and c.name not in record.key
    ]
    return added, dropped


def _numbered(files: Sequence[BatchFile]) -> Iterator[tuple[int, BatchFile]]:
    """Each file with its number among the request's files of its kind (`replace_0`, `replace_1`, ...)."""
    seen: dict[str, int] = {}
    for f in files:
        seen[f.kind] = seen.get(f.kind, -1) + 1
        yield seen[f.kind], f


def _sequence_of(name: str) -> int:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


# --- files --------------------------------------------------------------------------------------


def _check_header(
    record: TableRecord, f: BatchFile, header: list[str], required: Sequence[str], allowed: set[str]
) -> None:
    table = f"table {record.schema}.{record.name}"
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise TableError(f"{table}: {f.kind} file {f.path} names column {name!r} twice")
        seen.add(name)
        if name not in allowed:
            raise TableError(f"{table}: {f.kind} file {f.path} has column {name!r}, which the table does not have")
    for name in required:
        if name not in seen:
            raise TableError(f"{table}: {f.kind} file {f.path} has no column {name!r}")


def _check_keys(
    record: TableRecord, f: BatchFile, header: list[str], params: FileParams
) -> Callable[[int, list[str]], None]:
    at = [(header.index(k), k) for k in record.key]
    tokens = {params.null_string, params.unmodified_string}

    def check(number: int, row: list[str]) -> None:
        for i, name in at:
            if row[i] in tokens:
                raise TableError(
                    f"table {record.schema}.{record.name}: {f.kind} file {f.path}, row {number}: "
                    f"key column {name!r} holds no value"
                )

    return check


def _history_columns(record: TableRecord, kind: str) -> tuple[list[str], set[str]]:
    """The columns a history batch's file must have, and those it may."""
    required = [*record.key, END if kind == "delete" else START]
    return required, {c.name for c in record.columns} | {START, END, ACTIVE, SYNCED}


def _copy_history_file(
    store: Store, record: TableRecord, f: BatchFile, params: FileParams, folder: str, n: int, built: _Built
) -> dict[str, str]:
    """Land one file of a history batch as it came (an uncompressed one compressed), checked."""
    name = f"{f.kind}_{n}{_EXTENSIONS[params.compression]}"
    digest = Digest()
    label = _label(record, f)
    with open_batch_file(f.path, label) as source, store.open_output(f"{folder}/{name}") as sink:
        raw = decrypted(source, f.key, label)
        compressor = None
        if params.compression == "off":
            compressor = zstandard.ZstdCompressor().stream_writer(sink, closefd=False)
            plain = _tee(raw, compressor.write)
        else:
            plain = decompressed(_tee(raw, sink.write), params.compression, label)
        rows = csv_rows(digest.through(plain), label)
        header = next(rows)
        required, allowed = _history_columns(record, f.kind)
        _check_header(record, f, header, required, allowed)
        check = _check_keys(record, f, header, params)
        for number, row in enumerate(rows, start=1):
            check(number, row)
        if compressor is not None:
            compressor.flush(zstandard.FLUSH_FRAME)
    built.add(f.kind, digest.sha256.hexdigest())
    return {"kind": f.kind, "path": name}


def _label(record: TableRecord, f: BatchFile) -> str:
    """A file as an error names it: its table, its kind and its path."""
    return f"table {record.schema}.{record.name}: {f.kind} file {f.path}"


def _tee(chunks: Iterator[bytes], sink: Callable[[bytes], Any]) -> Iterator[bytes]:
    for chunk in chunks:
        sink(chunk)
        yield chunk


class _Writer:
    """A zstd-compressed CSV file written row by row, as the landing reads it; a file with no
    row is not written at all."""

    def __init__(self, store: Store, path: str, header: Sequence[str]) -> None:
        self.store, self.path, self.header, self.rows = store, path, header, 0
        self._text: io.TextIOWrapper | None = None

    def __enter__(self) -> _Writer:
        return self

    def write(self, row: Sequence[str]) -> None:
        if self._text is None:
            zstd = zstandard.ZstdCompressor().stream_writer(self.store.open_output(self.path))
            self._text = io.TextIOWrapper(zstd, encoding="utf-8", newline="")
            self._csv = csv.writer(self._text, lineterminator="\n")
            self._csv.writerow(self.header)
        self._csv.writerow(row)
        self.rows += 1

    def __exit__(self, *exc: object) -> None:
        if self._text is not None:
            self._text.close()  # ends the zstd frame and closes the file


def _rewrite_live_file(
    store: Store,
    record: TableRecord,
    f: BatchFile,
    params: FileParams,
    folder: str,
    n: int,
    built: _Built,
    earliest: _Writer,
    received: str,
) -> dict[str, str]:
    """One file of a live batch as history-mode rows: each a version starting at its
    `_fivetran_synced` (the request's arrival when a row has none); a delete ends the key's
    version then."""
    name = f"{f.kind}_{n}.csv.zst"
    digest = Digest()
    label = _label(record, f)
    with open_batch_file(f.path, label) as source:
        plain = decompressed(decrypted(source, f.key, label), params.compression, label)
        rows = csv_rows(digest.through(plain), label)
        header = next(rows)
        allowed = {c.name for c in record.columns} | {SYNCED}
        _check_header(record, f, header, record.key, allowed)
        check = _check_keys(record, f, header, params)
        synced_at = header.index(SYNCED) if SYNCED in header else None
        key_at = [header.index(k) for k in record.key]
        written = (
            [*record.key, END]
            if f.kind == "delete"
            else [*header, *([] if synced_at is not None else [SYNCED]), START, END, ACTIVE]
        )
        with _Writer(store, f"{folder}/{name}", written) as out:
            for number, row in enumerate(rows, start=1):
                check(number, row)
                synced = received if synced_at is None or row[synced_at] in (params.null_string, "") else row[synced_at]
                keys = [row[i] for i in key_at]
                if f.kind == "delete":
                    out.write([*keys, synced])
                    continue
                out.write([*row, *([] if synced_at is not None else [synced]), synced, OPEN_END, "true"])
                earliest.write([*keys, synced])
    built.add(f.kind, digest.sha256.hexdigest())
    return {"kind": f.kind, "path": name}


def refused(exc: Exception) -> bool:
    """An error the sender can act on (the request, its files, the table), not the server's own."""
    return isinstance(exc, TableError | BatchFileError)
