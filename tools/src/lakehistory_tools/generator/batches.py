"""From a source's change events to the batch Fivetran's history mode sends (spec rules 2, 6-12).

The simulator records, per table, an append-only list of **events**: a key, a valid time in
milliseconds, an operation (a new version with the full row, or a delete) and the sync in which
the source reported it. A late version is an event whose time lies before events already sent.
`build_batch` turns the events of one sync into one `Batch`, vectorised with numpy:

* per key the batch re-sends its history from a point R on: R is the earliest new version, moved
  back to the start of the version before it when the destination already holds that version
  closed by something else: a new delete followed by more versions (delete and resurrection in one
  sync; the gap is then expressed by that version's `_fivetran_end`), or a late version inside the
  interval of a version already superseded (rule 8 only closes the active row, so the superseded
  version is re-sent with its shortened end, then everything after it);
* every version from R on is a replace or update row with `_fivetran_end` = next start - 1 ms, or
  the delete time when a delete follows, or TMAX with `_fivetran_active` when it is the last;
* an update row is allowed only when the previous event of the key is a version (rule 10) and
  carries UNMODIFIED in every data column equal to that previous version (explicit values,
  including None, where it changed);
* the earliest row of a key is its first re-sent version; a key whose latest event is a delete made
  in this sync gets a delete row with `_fivetran_end` = the delete time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lakehistory.landing.batch import UNMODIFIED, Batch
from lakehistory.names import ACTIVE, END, START, SYNCED
from lakehistory_tools.generator.domain import TableDef

VERSION = 1
DELETE = 2

INT_NULL = np.iinfo(np.int64).min
"""NULL in an int64 value column (bigint or timestamp-in-ms)."""
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TMAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
MS_SECOND = 1000
MS_MINUTE = 60 * MS_SECOND
MS_HOUR = 60 * MS_MINUTE
MS_DAY = 24 * MS_HOUR
_UTC = dt.UTC


def to_ms(t: dt.datetime) -> int:
    """Milliseconds since the epoch of an aware datetime (naive ones are taken as UTC)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=_UTC)
    delta = t - EPOCH
    return delta.days * MS_DAY + delta.seconds * MS_SECOND + delta.microseconds // 1000


def ms_to_dt(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=int(ms))


def ms_to_datetimes(a: np.ndarray) -> list:
    """int64 milliseconds -> list of aware UTC datetimes (INT_NULL -> None)."""
    a = np.asarray(a, dtype=np.int64)
    null = a == INT_NULL
    naive = np.where(null, 0, a).astype("datetime64[ms]").astype(object)
    out = [d.replace(tzinfo=_UTC) for d in naive]
    if null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


def _ints(a: np.ndarray) -> list:
    out = a.tolist()
    null = a == INT_NULL
    if null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


def _floats(a: np.ndarray) -> list:
    out = a.tolist()
    null = np.isnan(a)
    if null.any():
        for i in np.flatnonzero(null).tolist():
            out[i] = None
    return out


def to_python(a: np.ndarray, spark_type: str) -> list:
    """A value column (object, int64 or float64 array) as Python values of `spark_type`."""
    if a.dtype == object:
        return a.tolist()
    if spark_type == "timestamp":
        return ms_to_datetimes(a)
    if a.dtype.kind == "f":
        return _floats(a)
    if a.dtype.kind in "iu":
        if spark_type == "boolean":
            return [None if x < 0 else bool(x) for x in a.tolist()]
        return _ints(a)
    return a.tolist()


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return np.array([x == y and (x is None) == (y is None) for x, y in zip(a.tolist(), b.tolist())], dtype=bool)
    eq = a == b
    if a.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


@dataclass
class Events:
    """Columnar events of some keys (any order). `values` holds the data columns (not the key);
    their entries on delete events are ignored."""

    key: np.ndarray  # int64
    t: np.ndarray  # int64 ms
    op: np.ndarray  # int8: VERSION or DELETE
    sync: np.ndarray  # int32
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.key)


@dataclass
class BatchStats:
    replace: int = 0
    update: int = 0
    delete: int = 0
    earliest: int = 0
    keys: int = 0
    multi_version_keys: int = 0  # keys with several versions in the batch
    late_keys: int = 0  # keys whose earliest start is before a start already sent
    unmodified_cells: int = 0
    explicit_null_cells: int = 0  # None written in an update row


class InvalidEventsError(ValueError):
    pass


def build_batch(
    tdef: TableDef,
    events: Events,
    sync: int,
    synced_ms: int,
    *,
    batch_id: str,
    rng: np.random.Generator,
    p_update: float = 0.7,
    converters: Mapping[str, Callable[[np.ndarray], list]] | None = None,
    author: str = "crmp-loader",
    app_id: str = "pcic.crmp.ingest",
) -> tuple[Batch, BatchStats]:
    """The batch of sync `sync` for `tdef`, from all events of the keys that changed in it.

    `events` must hold, for every key with an event in `sync`, all of that key's events (earlier
    ones too: they decide update eligibility and the `_fivetran_end` of re-sent versions); events
    of other keys may be present and are ignored.
    """
    if len(tdef.key) != 1:
        raise ValueError("build_batch supports single-column keys")
    keycol = tdef.key[0]
    data_cols = tdef.data_columns
    types = tdef.types
    converters = dict(converters or {})

    new_keys = np.unique(events.key[events.sync == sync])
    batch = Batch(
        table=tdef.name,
        batch_id=batch_id,
        sequence=sync,
        key=list(tdef.key),
        columns=list(tdef.columns),
        earliest=[],
        author=author,
        app_id=app_id,
    )
    stats = BatchStats()
    if len(new_keys) == 0:
        batch.commit_message = f"sync {sync}: no changes"
        return batch, stats

    mine = np.isin(events.key, new_keys)
    idx = np.flatnonzero(mine)
    order = idx[np.lexsort((events.t[idx], events.key[idx]))]
    k = events.key[order]
    t = events.t[order]
    op = events.op[order]
    sy = events.sync[order]
    n = len(k)

    first = np.ones(n, dtype=bool)
    first[1:] = k[1:] != k[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = first[1:]
    if np.any((t[1:] <= t[:-1]) & ~first[1:]):
        bad = np.flatnonzero((t[1:] <= t[:-1]) & ~first[1:])[0]
        raise InvalidEventsError(f"{tdef.name}: key {k[bad + 1]} has two events at or out of order near t={t[bad + 1]}")
    if np.any(first & (op == DELETE)):
        raise InvalidEventsError(f"{tdef.name}: a key's first event is a delete")
    if np.any((op[1:] == DELETE) & (op[:-1] == DELETE) & ~first[1:]):
        raise InvalidEventsError(f"{tdef.name}: two deletes in a row for one key")
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)

    # R per key: earliest new version, or the version closed by a new delete that is followed by more.
    big = np.iinfo(np.int64).max
    cand = np.full(n, big, dtype=np.int64)
    newv = (op == VERSION) & (sy == sync)
    cand[newv] = t[newv]
    mid_del = np.flatnonzero((op == DELETE) & (sy == sync) & ~last)
    cand[mid_del - 1] = np.minimum(cand[mid_del - 1], t[mid_del - 1])
    # A new version placed before events already sent (a late version) lands inside the interval
    # of an old version that the destination has already closed; rule 8 never touches inactive
    # rows, so that version is re-sent too, with its new end.
    old_t = np.where(sy < sync, t, -1)
    last_old = np.maximum.reduceat(old_t, starts)[group]
    late = np.flatnonzero(newv & ~first)
    late = late[(op[late - 1] == VERSION) & (sy[late - 1] < sync) & (t[late - 1] < last_old[late])]
    cand[late - 1] = np.minimum(cand[late - 1], t[late - 1])
    resend_from = np.minimum.reduceat(cand, starts)[group]
    sel = (op == VERSION) & (t >= resend_from)

    nxt_t = np.empty_like(t)
    nxt_t[:-1] = t[1:]
    nxt_t[-1] = 0
    nxt_op = np.empty_like(op)
    nxt_op[:-1] = op[1:]
    nxt_op[-1] = 0
    end = np.where(last, TMAX_MS, np.where(nxt_op == VERSION, nxt_t - 1, nxt_t))
    active = last & (op == VERSION)

    prev_op = np.empty_like(op)
    prev_op[1:] = op[:-1]
    prev_op[0] = 0
    eligible = sel & ~first & (prev_op == VERSION)
    draw = rng.random(n)
    is_update = eligible & (draw < p_update)
    is_replace = sel & ~is_update
    is_delete = (op == DELETE) & (sy == sync) & last

    sel_idx = np.flatnonzero(sel)
    sel_group = group[sel_idx]
    first_sel = sel_idx[np.r_[True, sel_group[1:] != sel_group[:-1]]] if len(sel_idx) else sel_idx

    # per-key facts for the stats
    nsel = np.bincount(sel_group, minlength=len(starts)) if len(sel_idx) else np.zeros(len(starts), int)
    stats.multi_version_keys = int(np.sum(nsel > 1))
    # late: the batch's earliest start is before a version start sent in an earlier sync
    old_sent = (op == VERSION) & (sy < sync)
    max_old = np.full(n, -1, dtype=np.int64)
    max_old[old_sent] = t[old_sent]
    max_old_key = np.maximum.reduceat(max_old, starts)
    if len(first_sel):
        stats.late_keys = int(np.sum(t[first_sel] < max_old_key[group[first_sel]]))

    vals = {c: np.asarray(events.values[c])[order] for c in data_cols}
    synced = ms_to_dt(synced_ms)

    def column(c: str, rows: np.ndarray) -> list:
        conv = converters.get(c)
        a = vals[c][rows]
        return conv(a) if conv else to_python(a, types[c])

    def system(rows: np.ndarray) -> dict[str, list]:
        return {
            START: ms_to_datetimes(t[rows]),
            END: ms_to_datetimes(end[rows]),
            ACTIVE: active[rows].tolist(),
            SYNCED: [synced] * len(rows),
        }

    def make_rows(rows: np.ndarray, update: bool) -> list[dict]:
        if len(rows) == 0:
            return []
        cols: dict[str, list] = {keycol: k[rows].tolist()}
        for c in data_cols:
            py = column(c, rows)
            if update:
                same = _same(vals[c][rows], vals[c][rows - 1])
                if same.any():
                    arr = np.empty(len(py), dtype=object)
                    arr[:] = py
                    arr[same] = UNMODIFIED
                    stats.unmodified_cells += int(same.sum())
                    py = arr.tolist()
                stats.explicit_null_cells += sum(1 for x in py if x is None)
            cols[c] = py
        cols.update(system(rows))
        names = list(cols)
        return [dict(zip(names, r)) for r in zip(*cols.values())]

    batch.replace = make_rows(np.flatnonzero(is_replace), False)
    batch.update = make_rows(np.flatnonzero(is_update), True)
    del_rows = np.flatnonzero(is_delete)
    batch.delete = [{keycol: kk, END: e} for kk, e in zip(k[del_rows].tolist(), ms_to_datetimes(t[del_rows]))]
    batch.earliest = [{keycol: kk, START: s} for kk, s in zip(k[first_sel].tolist(), ms_to_datetimes(t[first_sel]))]

    stats.replace = len(batch.replace)
    stats.update = len(batch.update)
    stats.delete = len(batch.delete)
    stats.earliest = len(batch.earliest)
    stats.keys = int(len(new_keys))
    batch.commit_message = f"sync {sync}: {stats.replace} replace, {stats.update} update, {stats.delete} delete rows"
    return batch, stats


def key_intervals(events: Events) -> dict[int, list[tuple]]:
    """Per key, its versions as (start_ms, end_ms, row index into `events`), the end following the
    same rules as the batches: next start - 1 ms, the delete time, or TMAX. For tests and checks."""
    order = np.lexsort((events.t, events.key))
    k, t, op = events.key[order], events.t[order], events.op[order]
    out: dict[int, list[tuple]] = {}
    n = len(k)
    for i in range(n):
        if op[i] != VERSION:
            continue
        if i + 1 < n and k[i + 1] == k[i]:
            e = int(t[i + 1]) - 1 if op[i + 1] == VERSION else int(t[i + 1])
        else:
            e = TMAX_MS
        out.setdefault(int(k[i]), []).append((int(t[i]), e, int(order[i])))
    return out
