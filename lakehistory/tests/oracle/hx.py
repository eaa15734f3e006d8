"""Reference model of `_hx` tables (docs/hx-tables.md), in plain Python: a test oracle.

After each transaction, the source's valid-time history (a Fivetran history-mode table, rows as
`oracle.fivetran` keeps them) gives every key's change points: a version starts (its values), or
a deletion takes effect (`_fivetran_end` + 1 ms, the last values). The `_hx` reading at t is the
row with the greatest (mod_time, id) at or before t. A transaction appends, per key, a row at each
change point the `_hx` rows lack or state differently, and at each earlier `_hx` time whose
reading no longer holds; ids follow (transaction, mod_time, key).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehistory.landing.batch import ONE_MS, Row
from lakehistory.names import ACTIVE, END, START

Key = tuple


@dataclass(frozen=True)
class State:
    deleted: bool
    values: tuple

    def same(self, other: State | None) -> bool:
        gone, other_gone = self.deleted, other is None or other.deleted
        return (gone and other_gone) or (not gone and not other_gone and self.values == other.values)


def change_points(rows: Sequence[Row], key: Sequence[str], data: Sequence[str]) -> dict[Key, dict[dt.datetime, State]]:
    """Per key: change time -> state, from the rows of a Fivetran history-mode table."""
    out: dict[Key, dict[dt.datetime, State]] = {}
    by_key: dict[Key, list[Row]] = {}
    for r in rows:
        by_key.setdefault(tuple(r[k] for k in key), []).append(r)
    for k, versions in by_key.items():
        versions.sort(key=lambda r: r[START])
        points = out.setdefault(k, {})
        for i, r in enumerate(versions):
            values = tuple(r.get(c) for c in data)
            points[r[START]] = State(False, values)
            following = versions[i + 1][START] if i + 1 < len(versions) else None
            # Deleted when it ends before the next version starts; a late version leaves the
            # version before it overlapping (rule 8), and the later start supersedes it.
            if not r[ACTIVE] and (following is None or following > r[END] + ONE_MS):
                points[r[END] + ONE_MS] = State(True, values)
    return out


@dataclass
class HxOracle:
    key: Sequence[str]
    data: Sequence[str]  # non-key columns
    rows: list[dict[str, Any]] = field(default_factory=list)

    def reading(self, k: Key, t: dt.datetime) -> dict[str, Any] | None:
        """The `_hx` row that governs key `k` at `t` (None before its first row)."""
        candidates = [r for r in self.rows if r["_key"] == k and r["mod_time"] <= t]
        return max(candidates, key=lambda r: (r["mod_time"], r["id"])) if candidates else None

    def _state(self, row: dict[str, Any] | None) -> State | None:
        return None if row is None else State(row["deleted"], row["_values"])

    def record(self, history: Sequence[Row], txn_id: int, author: str | None) -> list[dict[str, Any]]:
        """Append what transaction `txn_id` makes known, given the history table after it."""
        points = change_points(history, self.key, self.data)
        keys = set(points) | {r["_key"] for r in self.rows}
        new: list[dict[str, Any]] = []
        for k in keys:
            f = points.get(k, {})
            times = sorted(set(f) | {r["mod_time"] for r in self.rows if r["_key"] == k})
            for t in times:
                governing = [s for s in f if s <= t]
                f_state = f[max(governing)] if governing else None
                g_row = self.reading(k, t)
                g_state = self._state(g_row)
                if t in f:
                    needed = g_row is None or g_row["mod_time"] != t or not f[t].same(g_state)
                else:
                    needed = not (f_state.same(g_state) if f_state else g_state is None or g_state.deleted)
                if needed:
                    # A retracted state becomes a deletion carrying what it retracts.
                    state = f_state if f_state is not None else State(True, g_state.values)
                    new.append({"_key": k, "mod_time": t, "deleted": state.deleted, "_values": state.values})
        new.sort(key=lambda r: (r["mod_time"], r["_key"]))
        first = len(self.rows) + 1
        for i, r in enumerate(new):
            r.update(id=first + i, txn_id=txn_id, mod_user=author)
        self.rows.extend(new)
        return new

    def table(self) -> list[dict[str, Any]]:
        """The rows as the `_hx` table holds them (key and data columns by name)."""
        out = []
        for r in self.rows:
            row = dict(zip(self.key, r["_key"], strict=True)) | dict(zip(self.data, r["_values"], strict=True))
            out.append(row | {k: r[k] for k in ("mod_time", "mod_user", "deleted", "id", "txn_id")})
        return out

    def state_at(self, t: dt.datetime) -> dict[Key, tuple]:
        """key -> values of the keys the `_hx` reading says exist at `t`."""
        out = {}
        for k in {r["_key"] for r in self.rows}:
            row = self.reading(k, t)
            if row is not None and not row["deleted"]:
                out[k] = row["_values"]
        return out
