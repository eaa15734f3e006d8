"""The rewrites of stored rows a group's first batch may bring before its rows apply: a truncate
(rules 15, 16) and schema changes (rule 17), as CTEs of the rules' first query (rules.py)."""

from __future__ import annotations

from lakehistory.history.layout import Layout
from lakehistory.names import ACTIVE, END, START, SYNCED
from lakehistory.sql import cols, q


def truncate_cte(layout: Layout, source: str) -> str:
    keep = cols((*layout.keys, *layout.data, START), "l")
    soft = f"m.`_lh_truncate_mode` = 'soft' and l.{q(SYNCED)} < m.`_lh_truncate_before`"
    return f"""truncated as (
    -- rule 15: a hard truncate deletes every row synced before the cutoff;
    -- rule 16: a soft truncate ends the active ones at the cutoff
    select
        {keep},
        case
            when coalesce({soft} and l.{q(ACTIVE)}, false) then m.`_lh_truncate_before` else l.{q(END)}
        end as {q(END)},
        l.{q(ACTIVE)} and not coalesce({soft}, false) as {q(ACTIVE)},
        l.{q(SYNCED)}
    from {source} as l
    cross join (select * from batch where `_lh_kind` = 'batch' and `_lh_b` = 1) as m
    where not coalesce(m.`_lh_truncate_mode` = 'hard' and l.{q(SYNCED)} < m.`_lh_truncate_before`, false)
)"""


def schema_change_ctes(layout: Layout, source: str, index: int, row_number: int, op: str, column: str) -> list[str]:
    """Rule 17, one schema change (op on column) at instant T: an active row that started before
    T is closed at T - 1 ms and copied at T with the column's new value (the default, or NULL for
    a drop, only where the column is not NULL); a row starting at T (an earlier change at the
    same T) takes the value in place, so changes at one T compose and repeating one is a no-op."""
    c = q(column)
    if op == "add_column":
        copies = f"l.{q(ACTIVE)} and l.{q(START)} < c.`_lh_at`"
        in_place = f"l.{q(ACTIVE)} and l.{q(START)} = c.`_lh_at` and l.{c} is null"
    else:
        copies = f"l.{q(ACTIVE)} and l.{q(START)} < c.`_lh_at` and l.{c} is not null"
        in_place = f"l.{q(ACTIVE)} and l.{q(START)} = c.`_lh_at` and l.{c} is not null"
    kept, copied = [], []
    for name in layout.row:
        if name == column:
            kept.append(f"case when {in_place} then c.`_lh_value` else l.{c} end as {c}")
            copied.append(f"c.`_lh_value` as {c}")
        elif name == END:
            kept.append(f"case when {copies} then c.`_lh_at` - interval 1 millisecond else l.{q(END)} end as {q(END)}")
            copied.append(f"l.{q(END)}")
        elif name == ACTIVE:
            kept.append(f"l.{q(ACTIVE)} and not coalesce({copies}, false) as {q(ACTIVE)}")
            copied.append(f"l.{q(ACTIVE)}")
        elif name == START:
            kept.append(f"l.{q(START)}")
            copied.append(f"c.`_lh_at` as {q(START)}")
        else:
            kept.append(f"l.{q(name)}")
            copied.append(f"l.{q(name)}")
    return [
        f"""change_{index} as (
    -- rule 17, schema change {index} ({op} {column})
    select {q(START)} as `_lh_at`, {c} as `_lh_value`
    from batch
    where `_lh_kind` = 'schema_change' and `_lh_b` = 1 and `_lh_row` = {int(row_number)}
)""",
        f"""changed_{index} as (
    select {", ".join(kept)}
    from {source} as l
    cross join change_{index} as c
    union all
    select {", ".join(copied)}
    from {source} as l
    cross join change_{index} as c
    where {copies}
)""",
    ]
