"""Transaction time of a history table, as a test oracle: the physical rows that the Fivetran
tables after each batch imply.

A physical row is one Fivetran row (every column equal) during a maximal run of consecutive
states that hold it: valid from the first batch of the run to the batch after its last (None
while it is still there). State 0 is the table before the first batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lakehistory.landing.batch import Row


def _identity(row: Row) -> str:
    return json.dumps({k: repr(v) for k, v in sorted(row.items())})


def physical_rows(states: Sequence[Sequence[Row]]) -> list[tuple[Row, int, int | None]]:
    """(row, valid_from, valid_to) for states 0..n (valid_to None: open after state n)."""
    open_rows: dict[str, tuple[Row, int]] = {}
    out: list[tuple[Row, int, int | None]] = []
    for index, state in enumerate(states):
        present = {_identity(r): r for r in state}
        for identity in list(open_rows):
            if identity not in present:
                row, since = open_rows.pop(identity)
                out.append((row, since, index))
        for identity, row in present.items():
            open_rows.setdefault(identity, (row, index))
    out += [(row, since, None) for row, since in open_rows.values()]
    return sorted(out, key=lambda t: (_identity(t[0]), t[1]))


def ordered(rows: Sequence[tuple[Row, int, Any]]) -> list[tuple[Row, int, Any]]:
    return sorted(rows, key=lambda t: (_identity(t[0]), t[1]))
