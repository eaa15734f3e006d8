"""History foreign keys: an as-of join on intervals of time (the rule written once, for the build
and for the `hx_resolved` macro)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame

from lakehistory.hx.model import ForeignKey, col, key_range
from lakehistory.names import MOD_TIME
from lakehistory.sql import q


def history_fk_sql(
    children: str,
    columns: Sequence[str],
    parent: str,
    parent_columns: Sequence[str],
    parent_id: str,
    resolved_as: str,
) -> str:
    """The history-FK rule, the one place it is written: a query over every row of `children` (a
    relation or a parenthesised query with the foreign key `columns` and `mod_time`) plus
    `resolved_as`, the id of the `parent` `_hx` row current at the child's mod_time: of the rows
    of the parent key, the one with the greatest (mod_time, id) at or before it; the first one
    when the child is older than them all (or has no mod_time); NULL when the foreign key is NULL
    or the parent key was never recorded. The build resolves new rows with it, `hx_resolved`
    every row against the parent rows known now.

    The parent's rows become intervals of time, each [its mod_time, the next row's) in the order
    (mod_time, id), the first one reaching back without end; of rows with one mod_time only the
    last keeps a non-empty interval. Each child joins the one interval of its key that holds its
    mod_time: an equi-join on the key with a range filter, so no window runs over the children
    and Spark broadcasts the intervals when they are small."""
    k = [f"`_lh_k{i}`" for i in range(len(columns))]
    keys = ", ".join(k)
    parent_keys = ", ".join(f"p.{q(c)} as {n}" for c, n in zip(parent_columns, k, strict=True))
    same_key = " and ".join(f"c.{q(c)} = i.{n}" for c, n in zip(columns, k, strict=True))
    return f"""select c.*, i.`_lh_parent` as {q(resolved_as)}
from {children} as c
left join (
    select {keys}, `_lh_parent`,
        case when row_number() over w > 1 then `_lh_t` end as `_lh_from`,
        lead(`_lh_t`) over w as `_lh_to`
    from (select {parent_keys}, p.`{MOD_TIME}` as `_lh_t`, p.{q(parent_id)} as `_lh_parent` from {parent} as p) as v
    window w as (partition by {keys} order by `_lh_t`, `_lh_parent`)
) as i
    on {same_key}
    and (i.`_lh_from` is null or i.`_lh_from` <= c.`{MOD_TIME}`)
    and (i.`_lh_to` is null or c.`{MOD_TIME}` is null or c.`{MOD_TIME}` < i.`_lh_to`)"""


def resolve_foreign_key(children: DataFrame, fk: ForeignKey, *, narrow: bool = True) -> DataFrame:
    """`children` plus `fk.hx_column`, by `history_fk_sql`.

    `narrow` first cuts the parent's rows down to the children's keys (a key range Delta skips
    files by, then a semi join), so that an incremental run's window covers its batch's parents,
    not the whole parent table. A first build passes `narrow=False`: its children are the whole
    child table, and cutting the parent down to their keys would cost a pass over them to save
    little."""
    parent = fk.parent
    if narrow:
        has_key = reduce(lambda x, y: x & y, [col(c).isNotNull() for c in fk.columns])
        wanted_keys = (
            children.where(has_key)
            .select(*[col(c).alias(p) for c, p in zip(fk.columns, fk.parent_columns, strict=True)])
            .distinct()
            .localCheckpoint()  # read twice: for the range and for the semi join
        )
        parent = parent.where(key_range(wanted_keys, fk.parent_columns[0])).join(
            wanted_keys, list(fk.parent_columns), "left_semi"
        )
    # pyspark's SQL formatter puts the DataFrames in for `{children}` and `{parent}`; every other
    # brace (in a column name, say) is doubled so that it stays literal.
    marks = {"children": "\x00children\x00", "parent": "\x00parent\x00"}
    sql = history_fk_sql(marks["children"], fk.columns, marks["parent"], fk.parent_columns, fk.hx_column, fk.hx_column)
    sql = sql.replace("{", "{{").replace("}", "}}")
    for name, mark in marks.items():
        sql = sql.replace(mark, "{" + name + "}")
    resolved = children.sparkSession.sql(sql, children=children, parent=parent)
    # Over Spark Connect the query names its inputs by id, and the server drops a checkpointed
    # input when its Python object goes: the result's plan holds them for as long as it lives.
    plan = getattr(resolved, "_plan", None)  # a Connect DataFrame's plan; classic Spark has none
    if plan is not None:
        plan.lakehistory_inputs = (children, parent)
    return resolved
