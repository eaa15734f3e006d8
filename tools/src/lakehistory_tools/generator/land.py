"""Generate the demo's landing root: history-mode batches and daily full extracts.

    from lakehistory_tools.generator import GeneratorConfig, generate
    summary = generate("/tmp/landing", GeneratorConfig(scale=100, syncs=5, seed=42),
                       file_format="parquet", extract_tables=["meta_vars"])

Per sync and per table, either one history-mode batch (`<root>/<table>/<batch_id>/`, written by
`lakehistory.landing.write.write_batch`) or, for the tables in `extract_tables`, one full extract
of the table's current state (`<root>/extracts/<table>/<YYYY-MM-DD>.csv`, see `write_extract`).
`generate(..., only_sync=k)` lands just sync k, as a daily job would; `landed_syncs` tells how many
syncs a landing root already holds.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
import os
import pathlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lakehistory.landing.batch import EXTRACT_SYNC_SUFFIX, Sync
from lakehistory_tools.generator.batches import BatchStats, to_python
from lakehistory_tools.generator.domain import OBS_RAW, TABLE_NAMES, get_table
from lakehistory_tools.generator.simulator import GeneratorConfig, SourceSimulator, batch_id, sync_of, tables_in_order

if TYPE_CHECKING:
    from lakehistory.landing.write import Compression, EarliestForm, FileFormat

EXTRACTS_DIR = "extracts"
EXTRACTED_AT = "extracted_at"
EXTRACTED_BY = "extracted_by"
EXTRACT_NULL = ""  # NULL is an empty field in extracts (no generated string is empty)


def extract_path(landing_root, table: str, day: dt.date) -> pathlib.Path:
    """`<landing_root>/extracts/<table>/<YYYY-MM-DD>.csv`."""
    return pathlib.Path(landing_root) / EXTRACTS_DIR / table / f"{day.isoformat()}.csv"


def _text(v) -> str:
    if v is None:
        return EXTRACT_NULL
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        u = v.astimezone(dt.UTC)
        return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def write_extract(
    landing_root,
    table: str,
    extracted_at: dt.datetime,
    columns: dict[str, np.ndarray],
    *,
    extracted_by: str = GeneratorConfig.extract_author,
    sync: Sync | None = None,
    sync_author: tuple[str | None, str | None] = (None, None),
) -> pathlib.Path:
    """Write one daily full extract: a header (the table's columns, then `extracted_at` and
    `extracted_by`, the same on every row) and one row per current row, ordered by key. Timestamps
    are ISO 8601 UTC with milliseconds, booleans `true`/`false`, NULL an empty field. Written to a
    temporary name and renamed, so a reader never sees a partial file. Returns the path. `sync`:
    the sync the extract belongs to, with its author and app (`sync_author`), written first
    beside it as `<day>.sync.json`."""
    tdef = get_table(table)
    path = extract_path(landing_root, table, extracted_at.date())
    path.parent.mkdir(parents=True, exist_ok=True)
    if sync is not None:
        said = {"id": sync.id, "sequence": sync.sequence, "tables": list(sync.tables)}
        said |= dict(zip(("author", "app_id"), sync_author, strict=True))
        path.with_suffix(EXTRACT_SYNC_SUFFIX).write_text(json.dumps(said, indent=2), encoding="utf-8")
    names = list(tdef.column_names)
    cols = []
    for c in names:
        a = columns[c]
        py = to_python(a, tdef.types[c]) if a.dtype != object else a.tolist()
        cols.append([_text(x) for x in py])
    stamp = _text(extracted_at)
    n = len(cols[0]) if cols else 0
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(names + [EXTRACTED_AT, EXTRACTED_BY])
    w.writerows(zip(*cols, [stamp] * n, [extracted_by] * n))
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass
class TableSummary:
    table: str
    mode: str  # "history" or "extract"
    batches: int = 0
    replace: int = 0
    update: int = 0
    delete: int = 0
    earliest: int = 0
    extract_files: int = 0
    extract_rows: int = 0  # rows in the last extract
    multi_version_keys: int = 0
    late_keys: int = 0
    unmodified_cells: int = 0
    explicit_null_cells: int = 0
    seconds: float = 0.0

    def add(self, s: BatchStats) -> None:
        self.batches += 1
        for f in (
            "replace",
            "update",
            "delete",
            "earliest",
            "multi_version_keys",
            "late_keys",
            "unmodified_cells",
            "explicit_null_cells",
        ):
            setattr(self, f, getattr(self, f) + getattr(s, f))


@dataclass
class GenerateSummary:
    landing_root: pathlib.Path
    config: GeneratorConfig
    tables: dict[str, TableSummary] = field(default_factory=dict)
    changes: dict[str, dict[str, int]] = field(default_factory=dict)  # simulated changes per table and kind
    seconds: float = 0.0  # wall time of the whole run
    simulate_seconds: float = 0.0  # of which simulating the source


ProgressCallback = Callable[[int, str | None], None]


def generate(
    landing_root,
    config: GeneratorConfig,
    *,
    tables: Sequence[str] | None = None,
    extract_tables: Sequence[str] = (),
    file_format: FileFormat = "csv",
    compression: Compression = "none",
    earliest_form: EarliestForm = "file",
    shuffle_columns: bool = True,
    on_progress: ProgressCallback | None = None,
    only_sync: int | None = None,
) -> GenerateSummary:
    """Simulate `config.syncs` syncs and land them under `landing_root`.

    `tables` (default: all five) are written; those also in `extract_tables` as daily full
    extracts, the others as history-mode batches (`000001`, `000002`, ... with sequence 1, 2, ...).
    With `only_sync=k`, syncs 1..k are simulated but only sync k is written, byte for byte what a
    full run writes for it: landing syncs 1, 2, ... one call at a time gives the full run's files.
    The summary then counts sync k's files (its `changes` are still those of syncs 1..k).
    `on_progress(sync, table)` is called after each table of each written sync, and with table
    None when a sync's simulation is done. Memory holds one batch at a time.
    """
    from lakehistory.landing.write import write_batch  # lazily: the writer is a sibling package

    names = list(tables) if tables is not None else list(TABLE_NAMES)
    todo = tables_in_order(names)
    extract = set(extract_tables)
    bad = extract - {t.name for t in todo}
    if bad:
        raise ValueError(f"extract tables {sorted(bad)} are not among the tables written ({', '.join(names)})")
    if only_sync is not None and not 1 <= only_sync <= config.syncs:
        raise ValueError(f"only_sync must be between 1 and {config.syncs}, got {only_sync}")
    last = only_sync if only_sync is not None else config.syncs
    config = dataclasses.replace(
        config,
        with_obs=OBS_RAW.name in {t.name for t in todo},
        keep_all_obs=config.keep_all_obs or OBS_RAW.name in extract,
    )
    root = pathlib.Path(landing_root)
    root.mkdir(parents=True, exist_ok=True)

    t_begin = time.perf_counter()
    sim = SourceSimulator(config)
    summary = GenerateSummary(root, config)
    for t in todo:
        summary.tables[t.name] = TableSummary(t.name, "extract" if t.name in extract else "history")
    while sim.sync < last:
        t0 = time.perf_counter()
        sync = sim.advance()
        summary.simulate_seconds += time.perf_counter() - t0
        if on_progress:
            on_progress(sync, None)
        if only_sync is not None and sync < only_sync:
            continue  # batches and rngs are per sync, so skipping earlier writes changes nothing later
        day_sync = sync_of(config, sync, sim.sync_time(sync).date(), [t.name for t in todo])
        for tdef in todo:
            t0 = time.perf_counter()
            ts = summary.tables[tdef.name]
            if tdef.name in extract:
                cols = sim.current_columns(tdef.name)
                write_extract(
                    root,
                    tdef.name,
                    sim.sync_time(sync),
                    cols,
                    extracted_by=config.extract_author,
                    sync=day_sync,
                    sync_author=(config.author, config.app_id),
                )
                ts.extract_files += 1
                ts.extract_rows = len(next(iter(cols.values()))) if cols else 0
                del cols
            else:
                batch, stats = sim.batch(tdef.name)
                batch.sync = day_sync
                rng = random.Random(f"{config.seed}:{tdef.name}:{sync}") if shuffle_columns else None
                write_batch(
                    root, batch, file_format=file_format, compression=compression, earliest_form=earliest_form, rng=rng
                )
                ts.add(stats)
                del batch
            ts.seconds += time.perf_counter() - t0
            if on_progress:
                on_progress(sync, tdef.name)
    summary.changes = {t: c for t, c in sim.counts().items() if t in summary.tables}
    summary.seconds = time.perf_counter() - t_begin
    return summary


def landed_syncs(
    landing_root,
    tables: Sequence[str] | None,
    extract_tables: Sequence[str] = (),
    *,
    start: dt.date = GeneratorConfig.start,
    syncs: int | None = None,
) -> int:
    """The highest k such that syncs 1..k are landed for every table in `tables` (None: all
    five), 0 when sync 1 is not; at most `syncs` when given.

    A history-mode table's sync k is landed when its batch's `manifest.json` exists (written
    last); a table of `extract_tables` when its extract of sync k's day (`start` + k-1 days, the
    day of `SourceSimulator.sync_time(k)`) exists (written under a temporary name, then renamed).
    """
    names = list(tables) if tables is not None else list(TABLE_NAMES)
    todo = tables_in_order(names)
    extract = set(extract_tables)
    bad = extract - set(names)
    if bad:
        raise ValueError(f"extract tables {sorted(bad)} are not among the tables ({', '.join(names)})")
    if not todo:
        raise ValueError("no tables to look for")
    root = pathlib.Path(landing_root)

    def landed(t: str, k: int) -> bool:
        if t in extract:
            return extract_path(root, t, start + dt.timedelta(days=k - 1)).is_file()
        return (root / t / batch_id(k) / "manifest.json").is_file()

    k = 0
    while (syncs is None or k < syncs) and all(landed(t.name, k + 1) for t in todo):
        k += 1
    return k


def summary_rows(summary: GenerateSummary) -> list[list[str]]:
    """Rows landed per table and kind (for the CLI): table, mode, files, replace, update, delete,
    earliest, extract rows."""
    rows = []
    for ts in summary.tables.values():
        history = ts.mode == "history"
        rows.append(
            [
                ts.table,
                ts.mode,
                str(ts.batches if history else ts.extract_files),
                *(str(getattr(ts, f)) if history else "" for f in ("replace", "update", "delete", "earliest")),
                "" if history else str(ts.extract_rows),
            ]
        )
    return rows


def change_rows(summary: GenerateSummary) -> list[list[str]]:
    """Changes simulated at the source per table and kind (for the CLI)."""
    return [[t] + [str(summary.changes.get(t, {}).get(k, 0)) for k in CHANGE_KINDS] for t in summary.tables]


SUMMARY_HEADER = ["table", "mode", "files", "replace", "update", "delete", "earliest", "extract"]
CHANGE_KINDS = ("insert", "update", "set_null", "delete", "resurrect", "late")
CHANGE_HEADER = ["table", "insert", "update", "set NULL", "delete", "resurrect", "late"]

__all__ = [
    "EXTRACTED_AT",
    "EXTRACTED_BY",
    "EXTRACT_NULL",
    "GenerateSummary",
    "TableSummary",
    "extract_path",
    "generate",
    "landed_syncs",
    "summary_rows",
    "write_extract",
    "SUMMARY_HEADER",
    "CHANGE_HEADER",
    "change_rows",
]
