"""The Fivetran rules (spec/fivetran-history-mode.md, rules 6-17) for a group of consecutive
batches at once, as one set-based query.

Applying batches one at a time changes a key's rows step by step. Across a group of batches the
same result follows from a few facts about each row, which window functions and joins over the
key and the batch order give without any loop:

- A row (a stored row, or a version a batch brings) is removed by the first later batch whose
  earliest start for its key is at or before the row's start (rule 7).
- An active row is closed by the first batch after it that has an earliest start for its key
  (rule 8, end = that start - 1 ms) or a delete of it (rule 11, end = the delete time; a delete
  also closes the versions of its own batch), unless that batch removes it. Inactive rows are
  never touched, and a row is closed at most once.
- An update's unmodified cell (rule 10) takes the previous version's value: an earlier version of
  its batch, else the newest row of the key still there when the batch comes in (after its
  overlap delete) and older than the batch's first version of the key. When every batch of the
  group puts its versions above the key's rows that are still there (always so with earliest
  starts), those rows are exactly the chain of previous versions, newest first, so the value is
  the newest of them that sets the cell. A batch that puts a version below a row still there
  (possible only without earliest starts) ends its group: `interleave` rows report it.

Each row thus lives in transaction time as one or two pieces: its content from the batch that
brings it until the batch that closes or removes it, and its closed content until its removal.
Pieces of one (key, `_fivetran_start`) that follow each other with equal content are one physical
row (a re-delivered version changes nothing, as when batches are applied one at a time).

Two queries compute a group (each result is small and kept in memory for the next step; a group
of one batch without a rewrite takes one query instead, one_batch.py):
1. `candidates_sql` over `__lh_group` (the staged rows of the group's batches, `_lh_b` = 1..n in
   batch order) and `__lh_stored` (the table's current rows the group reaches): every stored row
   and version with its fate (when it is removed, when it is touched).
2. `changes_sql` over step 1's `__lh_candidates`: one row per change, `_lh_action`:
     close   a stored row ends at batch `_lh_to`
     insert  a new physical row, valid from batch `_lh_from` to `_lh_to` (NULL: still open)
   `_lh_gone` marks a row whose (key, start) leaves the Fivetran table when it ends (rule 7, or
   a hard truncate), for the transaction's `rows_overlap_deleted`. `_lh_clash` is set on a row
   that batch `_lh_clash` brings while a row with its key and start is still there (rule 9 would
   give the table two rows with one primary key: that batch is refused); `_lh_interleave` on a
   version that batch `_lh_interleave` puts below a row still there (later batches go in a later
   group).
"""

from __future__ import annotations

from lakehistory.history.layout import Layout
from lakehistory.history.rewrites import schema_change_ctes, truncate_cte
from lakehistory.names import ACTIVE, EARLIEST, END, FIVETRAN_SYSTEM, START
from lakehistory.sql import cols, lit, q, same_key

GROUP_VIEW = "__lh_group"
STORED_VIEW = "__lh_stored"
CANDIDATES_VIEW = "__lh_candidates"
SYSTEM = FIVETRAN_SYSTEM


def candidates_sql(
    layout: Layout, schema_changes: tuple[tuple[int, str, str], ...] = (), truncate: bool = False
) -> str:
    """Step 1 of 2: every row that may be part of the group's history (the stored rows, as the
    first batch's truncate and schema changes leave them, and every version of the group's
    batches) with its fate: `_lh_removed` (rule 7) and `_lh_touch` (rules 8, 11). `truncate`
    and `schema_changes` ((row, op, column), in manifest order) belong to the group's first batch:
    they rewrite the stored rows before its rows apply (rules 15-17)."""
    k = layout.keys
    row = cols(layout.row)
    named = lit(layout.deleted_column.lower()) if layout.deleted_column else None
    mark = f"coalesce(lower(`_lh_deleted_column`) = {named}, false)" if named else "false"
    ctes = [
        f"batch as (\n    select * from {q(GROUP_VIEW)}\n)",
        f"""marks as (
    -- per batch: whether it names the table's deleted column (rules 8, 11, seed form)
    select `_lh_b`, {mark} as `_lh_mark` from batch where `_lh_kind` = 'batch'
)""",
        f"stored_rows as (\n    select {row} from {q(STORED_VIEW)}\n)",
    ]
    pre = "stored_rows"
    if truncate:
        ctes.append(truncate_cte(layout, pre))
        pre = "truncated"
    for index, (row_number, op, column) in enumerate(schema_changes, start=1):
        ctes.extend(schema_change_ctes(layout, pre, index, row_number, op, column))
        pre = f"changed_{index}"
    plain = layout.plain
    sep = ",\n        "
    in_batch = (
        f"partition by {cols(k, 'b')}, b.`_lh_b` order by b.{q(START)} rows between unbounded preceding and 1 preceding"
    )
    prev = [
        f"last(case when not array_contains(b.`_lh_unmodified`, {lit(c)}) then named_struct('v', b.{q(c)}) end, true)"
        f" over ({in_batch}) as `_lh_prev_{i}`"
        for i, c in enumerate(plain)
    ]
    no_prev = [f"cast(null as struct<v: {layout.types[c]}>) as `_lh_prev_{i}`" for i, c in enumerate(plain)]
    prev_names = [f"`_lh_prev_{i}`" for i in range(len(plain))]
    candidate = ", ".join(
        [row, "`_lh_b`", "`_lh_kind`", "`_lh_unmodified`", "`_lh_first`", "`_lh_replace_before`", *prev_names]
    )
    ctes += [
        f"""versioned as (
    select distinct {cols(k)}, `_lh_b` from batch where `_lh_kind` in ('replace', 'update')
)""",
        f"""events as (
    -- per batch and key: rule 6, the earliest start (earliest files, or `_fivetran_earliest` rows;
    -- a key a batch only deletes has none); rule 11, the delete time (the earliest delete wins)
    select {cols(k, "x")}, x.`_lh_b`, min(x.`_lh_e`) as `_lh_e`, min(x.`_lh_d`) as `_lh_d`, m.`_lh_mark`
    from (
        select {cols(k, "e")}, e.`_lh_b`, e.{q(START)} as `_lh_e`, null as `_lh_d`
        from batch as e
        left semi join versioned as v on {same_key("e", "v", k)} and e.`_lh_b` = v.`_lh_b`
        where (e.`_lh_has_earliest_file` and e.`_lh_kind` = 'earliest')
            or (not e.`_lh_has_earliest_file` and e.`_lh_kind` in ('replace', 'update') and e.{q(EARLIEST)})
        union all
        select {cols(k)}, `_lh_b`, null, {q(END)} from batch where `_lh_kind` = 'delete'
    ) as x
    inner join marks as m on m.`_lh_b` = x.`_lh_b`
    group by all
)""",
        f"""versions as (
    -- rules 9, 10: each batch's versions of a key in start order; an unmodified cell looks back
    -- to the batch's earlier versions first
    select
        {cols(layout.row, "b")},
        b.`_lh_b`,
        b.`_lh_kind`,
        b.`_lh_unmodified`,
        min(b.{q(START)}) over (partition by {cols(k, "b")}, b.`_lh_b`) as `_lh_first`,
        max(case when b.`_lh_kind` = 'replace' then 1 end)
            over ({in_batch}) as `_lh_replace_before`{"," if prev else ""}
        {sep.join(prev)}
    from batch as b
    where b.`_lh_kind` in ('replace', 'update')
)""",
        f"""candidates as (
    -- the stored rows (before the group: batch 0) and every version; an update the rules ignore
    -- (no previous version) is still here, and leaves in step 2
    select
        {row},
        0 as `_lh_b`,
        'stored' as `_lh_kind`,
        cast(array() as array<string>) as `_lh_unmodified`,
        cast(null as timestamp) as `_lh_first`,
        cast(null as int) as `_lh_replace_before`{"," if no_prev else ""}
        {sep.join(no_prev)}
    from {pre}
    union all
    select {candidate} from versions
)""",
    ]
    return (
        "with\n"
        + ",\n\n".join(ctes)
        + f"""

-- rule 7: the first later batch whose earliest start for the key is at or before the row's start
-- removes it; rules 8 and 11: the first batch with an earliest start (later) or a delete (the
-- row's own batch too) touches it, and closes it if it is active then
select
    f.`_lh_candidate`.*,
    f.`_lh_removed`,
    f.`_lh_touch`
from (
    select
        any_value(struct(c.*)) as `_lh_candidate`,
        min(case when ev.`_lh_b` > c.`_lh_b` and ev.`_lh_e` <= c.{q(START)} then ev.`_lh_b` end) as `_lh_removed`,
        min_by(
            named_struct(
                'b', ev.`_lh_b`,
                'end', case
                    when ev.`_lh_b` > c.`_lh_b` and ev.`_lh_e` is not null then ev.`_lh_e` - interval 1 millisecond
                    else ev.`_lh_d`
                end,
                'mark', ev.`_lh_mark`
            ),
            ev.`_lh_b`
        ) filter (where (ev.`_lh_b` > c.`_lh_b` and ev.`_lh_e` is not null) or ev.`_lh_d` is not null) as `_lh_touch`
    from candidates as c
    left join events as ev on {same_key("c", "ev", k)} and ev.`_lh_b` >= c.`_lh_b`
    group by {cols(k, "c")}, c.{q(START)}, c.`_lh_b`
) as f
"""
    )


def changes_sql(layout: Layout, rewritten: bool = False) -> str:
    """Step 2 of 2: the group's change set, from the candidates of step 1 in `__lh_candidates`
    (`rewritten`: the first batch truncates or changes the schema)."""
    k = layout.keys
    row = cols(layout.row)
    by_key = cols(k)
    plain = layout.plain
    sep = ",\n        "
    base = [
        f"max_by(c.{q(c_)}, c.{q(START)}) filter (where c.{q(START)} < f.`_lh_first`"
        f" and not array_contains(c.`_lh_unmodified`, {lit(c_)})) as `_lh_base_{i}`"
        for i, c_ in enumerate(plain)
    ]
    resolved_columns = resolved_sql(layout, version="v.", base="b.")
    ctes = [
        f"cand as (\n    select * from {q(CANDIDATES_VIEW)}\n)",
        f"""firsts as (
    select distinct {by_key}, `_lh_b`, `_lh_first` from cand where `_lh_b` > 0
)""",
        f"""bases as (
    -- rule 10: what a batch's first version of a key inherits from: the key's rows still there
    -- when the batch comes in (after its overlap delete) and older than that version, newest first
    select
        {cols(k, "f")},
        f.`_lh_b`,
        bool_or(c.`_lh_kind` <> 'update' and c.{q(START)} < f.`_lh_first`) as `_lh_has_base`,
        max(c.{q(START)}) as `_lh_top`{"," if base else ""}
        {sep.join(base)}
    from firsts as f
    inner join cand as c on {same_key("f", "c", k)} and c.`_lh_b` < f.`_lh_b`
    where c.`_lh_removed` is null or c.`_lh_removed` > f.`_lh_b`
    group by all
)""",
        f"""lives as (
    -- the stored rows and the versions the rules keep (rules 9, 10: replace rows as sent; an
    -- update with no previous version is ignored; the deleted column is never inherited)
    select {row}, `_lh_b`, `_lh_removed`, `_lh_touch`, cast(null as int) as `_lh_interleave`
    from cand
    where `_lh_b` = 0
    union all
    select
        {sep.join(part for part in (cols(k, "v"), resolved_columns, cols(SYSTEM, "v")) if part)},
        v.`_lh_b`,
        v.`_lh_removed`,
        v.`_lh_touch`,
        -- the version goes below a row still there: later batches go in a later group
        case when b.`_lh_top` > v.`_lh_first` then v.`_lh_b` end as `_lh_interleave`
    from cand as v
    left join bases as b on {same_key("v", "b", k)} and v.`_lh_b` = b.`_lh_b`
    where v.`_lh_b` > 0 and (v.`_lh_kind` = 'replace' or v.`_lh_replace_before` is not null or b.`_lh_has_base`)
)""",
    ]
    return changes_from_lives(layout, ctes, rewritten)


def resolved_sql(layout: Layout, version: str = "", base: str = "") -> str:
    """A version's data columns as rule 10 resolves them: an unmodified cell takes the batch's
    earlier version (`_lh_prev_<i>`), else the base (`_lh_base_<i>`); the deleted column is never
    inherited. `version` and `base`: the qualifiers of the version's columns and of the base."""
    sep = ",\n        "
    resolved = []
    for c in layout.data:
        unmodified = f"array_contains({version}`_lh_unmodified`, {lit(c)})"
        if c == layout.deleted_column:
            resolved.append(f"case when {unmodified} then false else {version}{q(c)} end")
        else:
            i = layout.plain.index(c)
            inherited = f"coalesce({version}`_lh_prev_{i}`, named_struct('v', {base}`_lh_base_{i}`)).v"
            resolved.append(f"case when {unmodified} then {inherited} else {version}{q(c)} end")
    return sep.join(f"{expr} as {q(c)}" for expr, c in zip(resolved, layout.data, strict=True))


def changes_from_lives(layout: Layout, ctes: list[str], rewritten: bool = False) -> str:
    """The change set from `lives` (a CTE among `ctes`: each stored row and kept version with
    `_lh_b`, `_lh_removed`, `_lh_touch` and `_lh_interleave`): its pieces in transaction time, the
    physical rows they make, and which of them the table holds now."""
    k = layout.keys
    row = cols(layout.row)
    by_key = cols(k)
    content = "named_struct(" + ", ".join(f"{lit(c)}, {q(c)}" for c in layout.content) + ")"
    open_piece = ", ".join(f"{lit(c)}, {q(c)}" for c in layout.row)
    closed_piece = ", ".join(
        f"{lit(c)}, "
        + {
            END: "`_lh_touch`.end",
            ACTIVE: "false",
        }.get(c, f"`_lh_touch`.mark or {q(c)}" if c == layout.deleted_column else q(c))
        for c in layout.row
    )
    ctes = [
        *ctes,
        f"""pieces as (
    -- a row's content until it is closed or removed, then its closed content until removed
    select p.*
    from (
        select explode(array(
            case when not (`_lh_closes` and `_lh_touch`.b = `_lh_b`) then named_struct(
                {open_piece},
                '_lh_from', `_lh_b`,
                '_lh_to', case when `_lh_closes` then `_lh_touch`.b else `_lh_removed` end,
                '_lh_interleave', `_lh_interleave`
            ) end,
            case when `_lh_closes` then named_struct(
                {closed_piece},
                '_lh_from', `_lh_touch`.b,
                '_lh_to', `_lh_removed`,
                '_lh_interleave', `_lh_interleave`
            ) end
        )) as p
        from (
            select
                l.*,
                l.{q(ACTIVE)} and l.`_lh_touch` is not null
                    and (l.`_lh_removed` is null or l.`_lh_touch`.b < l.`_lh_removed`) as `_lh_closes`
            from lives as l
        )
    )
    where p is not null
)""",
        f"""runs as (
    -- pieces of one (key, start) that follow each other with equal content are one row; a piece
    -- that begins before the one before it ends is a second row with that key and start (clash)
    select
        o.*,
        sum(case when `_lh_prev_to` = `_lh_from` and `_lh_prev_content` <=> `_lh_content` then 0 else 1 end) over (
            partition by {by_key}, {q(START)} order by `_lh_from` rows between unbounded preceding and current row
        ) as `_lh_run`,
        case
            when `_lh_prev_content` is not null and (`_lh_prev_to` is null or `_lh_prev_to` > `_lh_from`)
                then `_lh_from`
        end as `_lh_clash`
    from (
        select
            p.*,
            {content} as `_lh_content`,
            lag(`_lh_to`) over (partition by {by_key}, {q(START)} order by `_lh_from`) as `_lh_prev_to`,
            lag({content}) over (partition by {by_key}, {q(START)} order by `_lh_from`) as `_lh_prev_content`
        from pieces as p
    ) as o
)""",
        f"""physical as (
    select
        {row},
        min(`_lh_from`) as `_lh_from`,
        max_by(`_lh_to`, `_lh_from`) as `_lh_to`,
        min(`_lh_clash`) as `_lh_clash`,
        min(`_lh_interleave`) as `_lh_interleave`
    from runs
    group by {row}, `_lh_run`
)""",
    ]
    ctes += _stored_diff_ctes(layout, rewritten)
    return (
        "with\n"
        + ",\n\n".join(ctes)
        + f"""

select
    case when `_lh_stored` then 'close' else 'insert' end as `_lh_action`,
    {row},
    `_lh_from`,
    `_lh_to`,
    `_lh_gone`,
    `_lh_clash`,
    `_lh_interleave`
from ends
where not `_lh_stored` or `_lh_to` is not null
"""
    )


def _stored_diff_ctes(layout: Layout, rewritten: bool) -> list[str]:
    """`ends`: every physical row with `_lh_stored` (the table holds it now) and `_lh_gone`.
    Without a rewrite, the runs from batch 0 are the stored rows themselves. A truncate or schema
    change of the first batch may rewrite or remove stored rows: a stored row whose run from
    batch 0 has other content, or none, is closed by batch 1, and that run is new from batch 1
    (or never stored, when batch 1 also ends it)."""
    k = layout.keys
    row = ", ".join(q(c) for c in layout.row)
    if not rewritten:
        rows = f"""rows_after as (
    select {row}, `_lh_from`, `_lh_to`, `_lh_from` = 0 as `_lh_stored`, `_lh_clash`, `_lh_interleave` from physical
)"""
    else:
        content = " and ".join(f"s.{q(c)} <=> p.{q(c)}" for c in layout.content)
        rows = f"""kept_stored as (
    select {cols(layout.row, "s")}, p.`_lh_to`, p.`_lh_from` is not null as `_lh_same`
    from {q(STORED_VIEW)} as s
    left join physical as p
        on p.`_lh_from` = 0 and {same_key("s", "p", k)} and s.{q(START)} = p.{q(START)} and {content}
),

rows_after as (
    select
        {row}, 0 as `_lh_from`, case when `_lh_same` then `_lh_to` else 1 end as `_lh_to`, true as `_lh_stored`,
        cast(null as int) as `_lh_clash`, cast(null as int) as `_lh_interleave`
    from kept_stored
    union all
    select
        {cols(layout.row, "p")}, greatest(p.`_lh_from`, 1) as `_lh_from`, p.`_lh_to`, false as `_lh_stored`,
        p.`_lh_clash`, p.`_lh_interleave`
    from physical as p
    left anti join kept_stored as s
        on p.`_lh_from` = 0 and s.`_lh_same` and {same_key("s", "p", k)} and s.{q(START)} = p.{q(START)}
    -- a row the rewrite made that batch 1 itself ends was never part of the table: no empty row
    where p.`_lh_to` is null or p.`_lh_to` > greatest(p.`_lh_from`, 1)
)"""
    return [
        rows,
        f"""ends as (
    -- a row whose (key, start) has no row from the batch that ends it leaves the Fivetran table
    select
        r.*,
        `_lh_to` is not null and coalesce(
            lead(`_lh_from`) over (partition by {cols(k)}, {q(START)} order by `_lh_from`) <> `_lh_to`, true
        ) as `_lh_gone`
    from rows_after as r
)""",
    ]
