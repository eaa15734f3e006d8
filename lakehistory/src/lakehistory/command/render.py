"""Rows as a plain-text table for a terminal: a header, a rule, one line per row."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

WIDEST = 40  # a longer cell is cut, with an ellipsis


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds") if value.microsecond else value.isoformat(sep=" ")
    text = str(value).replace("\n", " ")
    return text if len(text) <= WIDEST else text[: WIDEST - 1] + "…"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)
