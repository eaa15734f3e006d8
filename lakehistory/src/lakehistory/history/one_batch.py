"""The rules (rules.py) for a group of one batch that neither truncates nor changes the schema,
as one plan: the group of every sync that brings a table one batch.

With one batch there is no later batch to remove or close a row, so every fact the two-step
plan joins the candidates for is a fact about the key: the batch's earliest start and delete
time for it (rules 6, 7, 8, 11), the first version it brings, and the newest stored row still
there below that version (rule 10's base). The stored rows and the batch's rows side by side,
each key's rows in one partition, give all of them by window functions: one read of each input
and no join, where the two steps read the candidates three times. Decision record 0010 has the
measurements; rules.py's two steps stay for every other group, and both give the same changes
(the reference-model tests run both).
"""

from __future__ import annotations

from lakehistory.history.layout import Layout
from lakehistory.history.rules import GROUP_VIEW, STORED_VIEW, SYSTEM, changes_from_lives, resolved_sql
from lakehistory.names import EARLIEST, END, START
from lakehistory.sql import cols, lit, q


def one_batch_sql(layout: Layout, marks_deleted: bool) -> str:
    """The change set of a group of one batch, with the columns of rules.changes_sql, from the
    batch's staged rows in `__lh_group` and the stored rows of its keys in `__lh_stored`.
    `marks_deleted`: the batch names the model's deleted column (rules 8 and 11 set it on the
    rows they close)."""
    k = layout.keys
    row = cols(layout.row)
    plain = layout.plain
    sep = ",\n        "
    by_key = f"partition by {cols(k)}"
    earlier = f"{by_key} order by {q(START)} rows between unbounded preceding and 1 preceding"
    is_version = "`_lh_kind` in ('replace', 'update')"
    kept = f"`_lh_b` = 0 and not `_lh_removed_now` and {q(START)} < `_lh_first`"
    prev = [
        f"last(case when {is_version} and not array_contains(`_lh_unmodified`, {lit(c)})"
        f" then named_struct('v', {q(c)}) end, true) over ({earlier}) as `_lh_prev_{i}`"
        for i, c in enumerate(plain)
    ]
    base = [
        f"max_by(case when {kept} then {q(c)} end, case when {kept} then {q(START)} end) over ({by_key})"
        f" as `_lh_base_{i}`"
        for i, c in enumerate(plain)
    ]
    resolved_columns = resolved_sql(layout)
    mark = "true" if marks_deleted else "false"
    ctes = [
        f"""side_by_side as (
    -- the stored rows (batch 0) and the batch's rows (batch 1) of its keys
    select {row}, 0L as `_lh_b`, 'stored' as `_lh_kind`, cast(array() as array<string>) as `_lh_unmodified`,
        false as `_lh_earliest`
    from {q(STORED_VIEW)}
    union all
    select {row}, 1L, `_lh_kind`, `_lh_unmodified`,
        -- rule 6: the earliest start comes from earliest files, or from `_fivetran_earliest` rows
        case when `_lh_has_earliest_file` then `_lh_kind` = 'earliest' else {is_version} and {q(EARLIEST)} end
    from {q(GROUP_VIEW)}
    where `_lh_kind` in ('replace', 'update', 'delete', 'earliest')
)""",
        f"""per_key as (
    -- the batch's facts about each row's key: its earliest start (only for a key it brings a
    -- version of), the delete time (the earliest delete wins), its first version's start
    select
        s.*,
        case when bool_or({is_version}) over ({by_key})
            then min(case when `_lh_earliest` then {q(START)} end) over ({by_key}) end as `_lh_e`,
        min(case when `_lh_kind` = 'delete' then {q(END)} end) over ({by_key}) as `_lh_d`,
        min(case when {is_version} then {q(START)} end) over ({by_key}) as `_lh_first`
    from side_by_side as s
)""",
        f"""fates as (
    -- rule 7: the batch's earliest start at or before a stored row's start removes it
    select *, coalesce(`_lh_b` = 0 and `_lh_e` <= {q(START)}, false) as `_lh_removed_now`
    from per_key
)""",
        f"""looked_back as (
    -- rule 10: an unmodified cell takes the batch's earlier version of the key, else the newest
    -- stored row still there below the batch's first version; an update with neither is ignored
    select
        f.*,
        max(case when `_lh_kind` = 'replace' then 1 end) over ({earlier}) as `_lh_replace_before`,
        bool_or({kept}) over ({by_key}) as `_lh_has_base`,
        max(case when `_lh_b` = 0 and not `_lh_removed_now` then {q(START)} end) over ({by_key}) as `_lh_top`{
            "," if plain else ""
        }
        {sep.join([*prev, *base])}
    from fates as f
)""",
        f"""lives as (
    -- one select, not a union of the stored rows and the versions, so that the windows above run
    -- once (a stored row has no unmodified cell: its columns resolve to themselves). Rules 8, 11:
    -- the batch's earliest start closes an active stored row it does not remove (at that start
    -- - 1 ms); a delete closes the key's rows, its versions too (at the delete time).
    select
        {sep.join(part for part in (cols(k), resolved_columns, cols(SYSTEM)) if part)},
        `_lh_b`,
        case when `_lh_removed_now` then 1L end as `_lh_removed`,
        case
            when `_lh_b` = 0 and `_lh_e` is not null
                then named_struct('b', 1L, 'end', `_lh_e` - interval 1 millisecond, 'mark', {mark})
            when `_lh_d` is not null then named_struct('b', 1L, 'end', `_lh_d`, 'mark', {mark})
        end as `_lh_touch`,
        -- a version that goes below a row still there (of no effect in a group of one batch)
        case when `_lh_b` = 1 and `_lh_top` > `_lh_first` then 1L end as `_lh_interleave`
    from looked_back
    where `_lh_b` = 0
        or ({is_version} and (`_lh_kind` = 'replace' or `_lh_replace_before` is not null or `_lh_has_base`))
)""",
    ]
    return changes_from_lives(layout, ctes)
