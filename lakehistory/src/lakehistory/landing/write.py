"""Land a change batch as files under a landing root (docs/landing-format.md).

`write_batch` writes `<landing_root>/<table>/<batch_id>/` with one data file per non-empty kind
and `manifest.json` last (a batch folder is complete once its manifest exists). Every cell is
written as text: NULL as the batch's `null_string`, the `UNMODIFIED` marker as its
`unmodified_string` (update files only), timestamps as ISO 8601 UTC with milliseconds.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import json
import os
import pathlib
import random
from collections.abc import Sequence
from typing import Any, Literal

from lakehistory.names import EARLIEST, END, START
from lakehistory.names import FIVETRAN_SYSTEM as SYSTEM_COLUMNS

from .batch import UNMODIFIED, Batch, Row
from .spec import FORMAT_VERSION, is_plain_name

__all__ = ["FORMAT_VERSION", "format_timestamp", "format_value", "write_batch"]


FileFormat = Literal["csv", "parquet"]
Compression = Literal["none", "gzip", "zstd"]
EarliestForm = Literal["file", "column"]

_CSV_EXTENSIONS = {"none": ".csv", "gzip": ".csv.gz", "zstd": ".csv.zst"}
_PARQUET_CODECS = {"none": "NONE", "gzip": "GZIP", "zstd": "ZSTD"}


def format_timestamp(value: dt.datetime) -> str:
    """`2007-12-03T10:15:30.123Z`: UTC, exactly three fraction digits (spec rule 3)."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: timestamps must be timezone-aware")
    if value.microsecond % 1000:
        raise ValueError(f"timestamp {value.isoformat()} has sub-millisecond precision")
    u = value.astimezone(dt.UTC)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond // 1000:03d}Z"
    )


def format_value(value: Any) -> str:
    """The text of a non-NULL value: booleans `true`/`false`, ISO dates and timestamps, else `str()`."""
    if value is None or value is UNMODIFIED:
        raise ValueError(f"{value!r} has no text of its own; it is written as a batch token")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _cell(batch: Batch, value: Any, column: str, *, unmodified_ok: bool) -> str:
    if value is None:
        return batch.null_string
    if value is UNMODIFIED:
        if not unmodified_ok:
            raise ValueError(f"UNMODIFIED in column {column!r}: allowed only in data columns of update rows")
        return batch.unmodified_string
    text = format_value(value)
    if text in (batch.null_string, batch.unmodified_string):
        raise ValueError(f"value {value!r} of column {column!r} would be read back as a batch token")
    return text


_Key = tuple[Any, ...]


def _earliest_starts(batch: Batch) -> dict[_Key, dt.datetime]:
    """Per source key, the earliest start of the batch (spec rule 6).

    From `batch.earliest` when given, else from rows with `_fivetran_earliest` True; when no
    replace/update row carries `_fivetran_earliest` at all, every key with replace/update rows
    gets its minimum `_fivetran_start`. Keys without replace/update rows are left out.
    """
    rows = [*batch.replace, *batch.update]
    with_rows = {tuple(r[k] for k in batch.key) for r in rows}
    if batch.earliest is not None:
        source: list[Row] = list(batch.earliest)
    elif any(EARLIEST in r for r in rows):
        source = [r for r in rows if r.get(EARLIEST)]
    else:
        source = rows
    starts: dict[_Key, dt.datetime] = {}
    for r in source:
        k = tuple(r[c] for c in batch.key)
        if k in with_rows and (k not in starts or r[START] < starts[k]):
            starts[k] = r[START]
    return starts


def _table_rows(
    batch: Batch, kind: str, rows: Sequence[Row], columns: Sequence[str], earliest: dict[_Key, dt.datetime] | None
) -> list[list[str]]:
    """Text cells of replace/update rows in `columns` order; `earliest` set: add the flag column."""
    protected = set(batch.key) | set(SYSTEM_COLUMNS)
    allowed = set(columns) | {EARLIEST}
    out = []
    for row in rows:
        extra = set(row) - allowed
        if extra:
            raise ValueError(f"{kind} row has columns not in batch.columns: {sorted(extra)}")
        cells = []
        for c in columns:
            if c == EARLIEST:
                assert earliest is not None
                k = tuple(row[x] for x in batch.key)
                value: Any = earliest.get(k) == row[START]
            elif c in row:
                value = row[c]
            else:
                raise ValueError(f"{kind} row lacks column {c!r}")
            cells.append(_cell(batch, value, c, unmodified_ok=kind == "update" and c not in protected))
        out.append(cells)
    return out


def _projected_rows(batch: Batch, kind: str, rows: Sequence[Row], columns: Sequence[str]) -> list[list[str]]:
    """Text cells of delete/earliest rows: only `columns` are written (others are ignored)."""
    out = []
    for row in rows:
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"{kind} row lacks columns {missing}")
        out.append([_cell(batch, row[c], c, unmodified_ok=False) for c in columns])
    return out


def _write_file(
    path: pathlib.Path, header: list[str], rows: list[list[str]], file_format: FileFormat, compression: Compression
) -> None:
    if file_format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = [pa.array([r[i] for r in rows], type=pa.string()) for i in range(len(header))]
        pq.write_table(pa.Table.from_arrays(arrays, names=header), path, compression=_PARQUET_CODECS[compression])
        return
    buf = io.StringIO()
    writer = csv.writer(
        buf, quotechar='"', doublequote=True, escapechar=None, lineterminator="\n", quoting=csv.QUOTE_MINIMAL
    )
    writer.writerow(header)
    writer.writerows(rows)
    data = buf.getvalue().encode("utf-8")
    if compression == "gzip":
        data = gzip.compress(data, mtime=0)
    elif compression == "zstd":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)


def _manifest(batch: Batch, files: list[dict[str, str]]) -> dict[str, Any]:
    changes = []
    for sc in batch.schema_changes:
        entry: dict[str, Any] = {"op": sc.op, "column": sc.column}
        if sc.op == "add_column":
            if not sc.type:
                raise ValueError(f"add_column {sc.column!r} needs a type")
            entry["type"] = sc.type
            entry["default"] = None if sc.default is None else format_value(sc.default)
        elif sc.op != "drop_column":
            raise ValueError(f"unknown schema change op {sc.op!r}")
        entry["at"] = format_timestamp(sc.at)
        changes.append(entry)
    truncate = None
    if batch.truncate is not None:
        if batch.truncate.mode not in ("hard", "soft"):
            raise ValueError(f"unknown truncate mode {batch.truncate.mode!r}")
        truncate = {"mode": batch.truncate.mode, "before": format_timestamp(batch.truncate.before)}
    # A batch of no sync says nothing of one: its manifest is as it was before syncs.
    sync = (
        {}
        if batch.sync is None
        else {"sync": {"id": batch.sync.id, "sequence": batch.sync.sequence, "tables": list(batch.sync.tables)}}
    )
    return {
        "format_version": FORMAT_VERSION,
        "table": batch.table,
        "batch_id": batch.batch_id,
        "sequence": batch.sequence,
        "key": list(batch.key),
        "null_string": batch.null_string,
        "unmodified_string": batch.unmodified_string,
        "author": batch.author,
        "app_id": batch.app_id,
        "commit_message": batch.commit_message,
        **({"commit_json": batch.commit_json} if batch.commit_json is not None else {}),
        **sync,
        "deleted_column": batch.deleted_column,
        "truncate": truncate,
        "schema_changes": changes,
        "files": files,
    }


def _check_name(what: str, name: str) -> None:
    if not is_plain_name(name):
        raise ValueError(f"{what} {name!r} cannot be a folder name")


def write_batch(
    landing_root: str | os.PathLike[str],
    batch: Batch,
    *,
    file_format: FileFormat = "csv",
    compression: Compression = "none",
    earliest_form: EarliestForm = "file",
    rng: random.Random | None = None,
) -> pathlib.Path:
    """Write `batch` under `landing_root` and return its folder `<landing_root>/<table>/<batch_id>`.

    - One file per non-empty kind: `replace_0`, `update_0`, `delete_0`, `earliest_0`, with the
      extension of the format (`.csv`, `.csv.gz`, `.csv.zst`, `.parquet`); Parquet files hold only
      string columns (`compression` then picks the Parquet codec); `manifest.json` is written last.
    - `earliest_form="file"`: the earliest set goes to an earliest file (key columns and
      `_fivetran_start`): `batch.earliest` as given, or derived per key from the rows' flags;
      replace/update files carry no `_fivetran_earliest`.
    - `earliest_form="column"`: replace/update files carry `_fivetran_earliest`, True on each key's
      earliest row (from `batch.earliest`, the rows' flags, or each key's minimum start when the
      rows carry no flag); no earliest file.
    - Delete files carry only the key columns and `_fivetran_end`.
    - `rng`: shuffle the column order of each file independently (readers match by name).

    Raises ValueError for values that cannot be written faithfully (UNMODIFIED outside the data
    columns of update rows, a value whose text equals a token, naive or sub-millisecond
    timestamps, rows whose columns do not match `batch.columns`) and FileExistsError when the
    batch folder already has a manifest.
    """
    if file_format not in ("csv", "parquet"):
        raise ValueError(f"unknown file_format {file_format!r}")
    if compression not in _CSV_EXTENSIONS:
        raise ValueError(f"unknown compression {compression!r}")
    if earliest_form not in ("file", "column"):
        raise ValueError(f"unknown earliest_form {earliest_form!r}")
    if batch.null_string == batch.unmodified_string:
        raise ValueError("null_string and unmodified_string must differ")
    _check_name("table", batch.table)
    _check_name("batch_id", batch.batch_id)

    folder = pathlib.Path(landing_root) / batch.table / batch.batch_id
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        raise FileExistsError(f"{manifest_path} exists: batch {batch.batch_id!r} was already written")

    key = list(batch.key)
    table_columns = [c.name for c in batch.columns] + list(SYSTEM_COLUMNS)
    starts = _earliest_starts(batch)
    flags = starts if earliest_form == "column" else None
    if flags is not None:
        present = {(tuple(r[k] for k in key), r[START]) for r in [*batch.replace, *batch.update]}
        lost = [k for k, s in starts.items() if (k, s) not in present]
        if lost:
            raise ValueError(f"earliest starts of keys {lost} match no replace/update row; use earliest_form='file'")
        table_columns.append(EARLIEST)
    if earliest_form == "file" and batch.earliest is not None:
        earliest_rows: list[Row] = list(batch.earliest)
    elif earliest_form == "file":
        earliest_rows = [{**dict(zip(key, k)), START: s} for k, s in starts.items()]
    else:
        earliest_rows = []

    kinds: list[tuple[str, list[str], list[list[str]]]] = [
        ("replace", table_columns, _table_rows(batch, "replace", batch.replace, table_columns, flags)),
        ("update", table_columns, _table_rows(batch, "update", batch.update, table_columns, flags)),
        ("delete", key + [END], _projected_rows(batch, "delete", batch.delete, key + [END])),
        ("earliest", key + [START], _projected_rows(batch, "earliest", earliest_rows, key + [START])),
    ]
    extension = ".parquet" if file_format == "parquet" else _CSV_EXTENSIONS[compression]
    files: list[dict[str, str]] = []
    manifest = _manifest(batch, files)  # validated before any file is written; `files` filled below
    folder.mkdir(parents=True, exist_ok=True)
    for kind, columns, rows in kinds:
        if not rows:
            continue
        order = list(range(len(columns)))
        if rng is not None:
            rng.shuffle(order)
        name = f"{kind}_0{extension}"
        _write_file(
            folder / name, [columns[i] for i in order], [[r[i] for i in order] for r in rows], file_format, compression
        )
        files.append({"kind": kind, "path": name})

    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    tmp = folder / ".manifest.json.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, manifest_path)
    return folder
