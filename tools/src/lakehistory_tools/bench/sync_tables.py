"""The tables of `python -m lakehistory_tools.bench.sync` and the batches it lands: every table its
own shape, as a connector's are, and each batch of a round the mix a connector sends (a key with
two versions, an update whose cells are partly unmodified, a delete, new versions)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path

from lakehistory.landing.batch import ONE_MS, TMAX, UNMODIFIED, Batch, Column, Row, Sync
from lakehistory.landing.write import write_batch

SOURCE = "sync"
# Every table its own shape, as a connector's are: table i has 4 to 60 columns (the key among
# them), no two of the first 57 as many, and its types in an order of its own.
MIN_WIDTH, WIDTHS = 4, 57
TYPES = ("string", "double", "boolean", "bigint", "date", "timestamp", "decimal(18,2)")
OPEN = 9223372036854775807  # a current row's valid_to (integer versions, open end 'max')
UNMODIFIED_STRING = "__unmodified__"  # noqa: S105 - the batches' unmodified_string, not a secret
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
SYSTEM_TYPES = {
    "_fivetran_start": "timestamp",
    "_fivetran_end": "timestamp",
    "_fivetran_active": "boolean",
    "_fivetran_synced": "timestamp",
}


def table(i: int) -> str:
    return f"s{i:03d}"


def model(i: int) -> str:
    return f"sync_{table(i)}"


def columns(i: int) -> list[Column]:
    """Table i's key and data columns."""
    width = MIN_WIDTH + i * 23 % WIDTHS  # 23 and 57 share no factor: i = 1..57 give every width once
    return [Column("id", "bigint"), *(Column(f"c{c:02d}", TYPES[(c + i) % len(TYPES)]) for c in range(1, width))]


def _value(type_: str, key: int, n: int, c: int):
    if type_ == "string":
        return f"value {key} v{n} c{c}"
    if type_ in ("double", "decimal(18,2)"):
        return round(key * 1.5 + n + c / 100, 2)
    if type_ == "boolean":
        return (key + n + c) % 2 == 0
    if type_ == "bigint":
        return key * 1000 + n * 10 + c
    if type_ == "date":
        return dt.date(2020, 1, 1) + dt.timedelta(days=key + n + c)
    return T0 + dt.timedelta(minutes=key + n + c)


def write_project(project: Path, tables: int) -> None:
    """One source entry and one history model per table, as a user's project has them."""
    folder = project / "models" / "sync"
    folder.mkdir(parents=True, exist_ok=True)
    entries = [
        {
            "name": table(i),
            "meta": {"lakehistory": {"key": ["id"]}},
            "columns": [{"name": c.name, "data_type": c.type} for c in columns(i)],
        }
        for i in range(1, tables + 1)
    ]
    source = {
        "name": SOURCE,
        "meta": {"lakehistory": {"landing_root": "{{ env_var('LAKEHISTORY_LANDING') }}"}},
        "tables": entries,
    }
    (folder / "_sync__sources.yml").write_text(json.dumps({"version": 2, "sources": [source]}, indent=2))
    for i in range(1, tables + 1):
        (folder / f"{model(i)}.sql").write_text(
            "{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key=['id']) }}\n"
            f"select * from {{{{ lakehistory.landing_batches('{SOURCE}', '{table(i)}') }}}}\n"
        )


def _row(i: int, key: int, start: dt.datetime, n: int) -> dict:
    data = {c.name: _value(c.type, key, n, at) for at, c in enumerate(columns(i)[1:], start=1)}
    return {
        "id": key,
        **data,
        "_fivetran_start": start,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": start,
    }


def land(landing: Path, i: int, n: int, keys: Sequence[int], sync: Sync | None = None) -> None:
    """Batch n of table i: a new version of each of `keys`, an hour after batch n - 1, in `sync`."""
    start = T0 + dt.timedelta(hours=n)
    _write(landing, i, n, sync, [_row(i, k, start, n) for k in keys])


def land_varied(landing: Path, i: int, n: int, keys: Sequence[int], sync: Sync | None, gone: set[int]) -> None:
    """Batch n of table i, an hour after batch n - 1, in `sync`, as a connector's batches come: of
    `keys` (three or more), the first gets two versions a minute apart, the second an update whose
    odd-numbered data columns are unmodified, the third is deleted, the others a new version each.
    `gone`: the table's deleted keys, kept up to date; a key of them the batch would update or
    delete gets a new version instead (an update needs a version before it, a delete an active row)."""
    twice, updated, deleted, *others = keys
    start = T0 + dt.timedelta(hours=n)
    later = start + dt.timedelta(minutes=1)
    replace = [
        {**_row(i, twice, start, n), "_fivetran_end": later - ONE_MS, "_fivetran_active": False},
        _row(i, twice, later, 10 * n + 1),
        *(_row(i, key, start, n) for key in others),
    ]
    update: list[Row] = []
    delete: list[Row] = []
    if updated in gone:
        replace.append(_row(i, updated, start, n))
    else:
        row = _row(i, updated, start, n)
        update.append({c: UNMODIFIED if _odd_data_column(c) else value for c, value in row.items()})
    if deleted in gone:
        replace.append(_row(i, deleted, start, n))
    else:
        delete.append({"id": deleted, "_fivetran_end": start})
    gone.difference_update(keys)  # each has a new version now, but the one deleted
    gone.update(d["id"] for d in delete)
    _write(landing, i, n, sync, replace, update, delete)


def _write(
    landing: Path,
    i: int,
    n: int,
    sync: Sync | None,
    replace: list[Row],
    update: Sequence[Row] = (),
    delete: Sequence[Row] = (),
) -> None:
    """Land batch n of table i, each key's earliest start from its new versions."""
    earliest: dict[int, dt.datetime] = {}
    for r in [*replace, *update]:
        earliest[r["id"]] = min(earliest.get(r["id"], r["_fivetran_start"]), r["_fivetran_start"])
    batch = Batch(
        table=table(i),
        batch_id=f"{n:06d}",
        sequence=n,
        key=["id"],
        columns=columns(i),
        replace=replace,
        update=list(update),
        delete=list(delete),
        earliest=[{"id": k, "_fivetran_start": s} for k, s in earliest.items()],
        sync=sync,
        unmodified_string=UNMODIFIED_STRING,
    )
    write_batch(landing, batch)


def _odd_data_column(name: str) -> bool:
    """c01, c03, ...: the data columns an update of land_varied leaves unmodified."""
    return name.startswith("c") and int(name[1:]) % 2 == 1


def land_sync(
    landing: Path,
    n: int,
    tables: Sequence[int],
    keys: Sequence[int],
    in_sync: bool = True,
    gone: dict[int, set[int]] | None = None,
) -> None:
    """Batch n of each of `tables` (their numbers), as one sync (`in_sync`) or as batches of their
    own: a new version of each of `keys`, or with `gone` (each table's deleted keys) a connector's
    mix (land_varied)."""
    sync = Sync(f"sync-{n:06d}", n, tuple(table(i) for i in tables)) if in_sync else None
    for i in tables:
        if gone is None:
            land(landing, i, n, keys, sync)
        else:
            land_varied(landing, i, n, keys, sync, gone.setdefault(i, set()))
