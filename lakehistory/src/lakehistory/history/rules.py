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

Inputs are two views: `__lh_group`, the staged rows of the group's batches with `_lh_b` = 1..n in
batch order, and `__lh_stored`, the rows of the history table current in transaction time that
the group can reach. The query returns one row per change, `_lh_action`:
  close       a stored row ends at batch `_lh_to`
  insert      a new physical row, valid from batch `_lh_from` to `_lh_to` (NULL: still open)
  clash       batch `_lh_from` brings a version whose key and start (given) a row still has
              (rule 9 would give the table two rows with one primary key): it cannot be applied
  interleave  batch `_lh_from` puts a version below a row still there; later batches go in a
              later group
`_lh_gone` marks a row whose (key, start) leaves the Fivetran table when it ends (rule 7, or a
hard truncate), for the transaction's `rows_overlap_deleted`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehistory.history.sql import cols, lit, q, same_key
from lakehistory.landing.batch import ACTIVE, EARLIEST, END, START, SYNCED

GROUP_VIEW = "__lh_group"
STORED_VIEW = "__lh_stored"
SYSTEM = (START, END, ACTIVE, SYNCED)


@dataclass(frozen=True)
class Layout:
    """The columns of one history table: source key, data columns in table order (the deleted
    column among them when the model names one) and their SQL types."""

    keys: tuple[str, ...]
    data: tuple[str, ...]
    types: dict[str, str]
    deleted_column: str | None = None

    @property
    def plain(self) -> tuple[str, ...]:
        """Data columns an update inherits through unmodified_string (never the deleted column)."""
        return tuple(c for c in self.data if c != self.deleted_column)

    @property
    def row(self) -> tuple[str, ...]:
        """Every column of a Fivetran row, in table order."""
        return (*self.keys, *self.data, *SYSTEM)

    @property
    def content(self) -> tuple[str, ...]:
        """What makes two rows of one (key, `_fivetran_start`) the same version."""
        return (*self.data, END, ACTIVE, SYNCED)


def changes_sql(layout: Layout, schema_changes: tuple[tuple[int, str, str], ...] = (), truncate: bool = False) -> str:
    """The change set of the group. `truncate` and `schema_changes` ((row, op, column), in
    manifest order) belong to the group's first batch: they rewrite the stored rows before its
    rows apply (rules 15-17), so such a batch always starts a group."""
    k = layout.keys
    row = ", ".join(q(c) for c in layout.row)
    content = "named_struct(" + ", ".join(f"{lit(c)}, {q(c)}" for c in layout.content) + ")"
    by_key = cols(k)
    mark = f"coalesce(`_lh_deleted_column` = {lit(layout.deleted_column)}, false)" if layout.deleted_column else "false"
    ctes = [
        f"batch as (\n    select * from {q(GROUP_VIEW)}\n)",
        f"""marks as (
    -- per batch: whether it names the table's deleted column (rules 8, 11, seed form)
    select `_lh_b`, {mark} as `_lh_mark` from batch where `_lh_kind` = 'batch'
)""",
    ]
    pre = "stored_rows"
    ctes.append(f"stored_rows as (\n    select {row} from {q(STORED_VIEW)}\n)")
    if truncate:
        ctes.append(_truncate_cte(layout, pre))
        pre = "truncated"
    for index, (row_number, op, column) in enumerate(schema_changes, start=1):
        ctes.extend(_schema_change_ctes(layout, pre, index, row_number, op, column))
        pre = f"changed_{index}"
    plain = layout.plain
    in_batch = "partition by {}, b.`_lh_b` order by b.{} rows between unbounded preceding and 1 preceding".format(
        cols(k, "b"), q(START)
    )
    prev = [
        f"last(case when not array_contains(b.`_lh_unmodified`, {lit(c)}) then named_struct('v', b.{q(c)}) end, true)"
        f" over ({in_batch}) as `_lh_prev_{i}`"
        for i, c in enumerate(plain)
    ]
    base = [
        f"max_by(c.{q(c_)}, c.{q(START)}) filter (where c.{q(START)} < f.`_lh_first`"
        f" and not array_contains(c.`_lh_unmodified`, {lit(c_)})) as `_lh_base_{i}`"
        for i, c_ in enumerate(plain)
    ]
    resolved = []
    for c in layout.data:
        if c == layout.deleted_column:
            resolved.append(f"case when array_contains(v.`_lh_unmodified`, {lit(c)}) then false else v.{q(c)} end")
        else:
            i = plain.index(c)
            resolved.append(
                f"case when array_contains(v.`_lh_unmodified`, {lit(c)})"
                f" then coalesce(v.`_lh_prev_{i}`, named_struct('v', b.`_lh_base_{i}`)).v else v.{q(c)} end"
            )
    sep = ",\n        "
    resolved_columns = sep.join(f"{expr} as {q(c)}" for expr, c in zip(resolved, layout.data, strict=True))
    closed_data = ", ".join(
        f"case when `_lh_touch`.mark then true else {q(c)} end as {q(c)}" if c == layout.deleted_column else q(c)
        for c in layout.data
    )
    ctes += [
        f"""versioned as (
    select distinct {by_key}, `_lh_b` from batch where `_lh_kind` in ('replace', 'update')
)""",
        f"""earliest as (
    -- rule 6: per batch and key, the earliest start (earliest files, or `_fivetran_earliest`
    -- rows); a key a batch only deletes has none
    select {cols(k, "e")}, e.`_lh_b`, min(e.{q(START)}) as `_lh_e`
    from batch as e
    left semi join versioned as v on {same_key("e", "v", k)} and e.`_lh_b` = v.`_lh_b`
    where (e.`_lh_has_earliest_file` and e.`_lh_kind` = 'earliest')
        or (not e.`_lh_has_earliest_file` and e.`_lh_kind` in ('replace', 'update') and e.{q(EARLIEST)})
    group by all
)""",
        f"""deletes as (
    -- rule 11: per batch and key, the delete time (the earliest delete wins)
    select {by_key}, `_lh_b`, min({q(END)}) as `_lh_d` from batch where `_lh_kind` = 'delete' group by all
)""",
        f"""events as (
    select
        {", ".join(f"coalesce(e.{q(c)}, d.{q(c)}) as {q(c)}" for c in k)},
        coalesce(e.`_lh_b`, d.`_lh_b`) as `_lh_b`,
        e.`_lh_e`,
        d.`_lh_d`,
        m.`_lh_mark`
    from earliest as e
    full outer join deletes as d on {same_key("e", "d", k)} and e.`_lh_b` = d.`_lh_b`
    inner join marks as m on m.`_lh_b` = coalesce(e.`_lh_b`, d.`_lh_b`)
)""",
        f"""versions as (
    -- rules 9, 10: each batch's versions of a key in start order; an unmodified cell looks back
    -- to the batch's earlier versions first
    select
        b.*,
        min(b.{q(START)}) over (partition by {cols(k, "b")}, b.`_lh_b`) as `_lh_first`,
        max(case when b.`_lh_kind` = 'replace' then 1 end)
            over ({in_batch}) as `_lh_replace_before`{"," if prev else ""}
        {sep.join(prev)}
    from batch as b
    where b.`_lh_kind` in ('replace', 'update')
)""",
        f"""candidates as (
    -- the stored rows (before the group: batch 0) and every version; an update the rules ignore
    -- (no previous version) is still here, and leaves at `resolved`
    select {row}, 0 as `_lh_b`, 'stored' as `_lh_kind`, cast(array() as array<string>) as `_lh_unmodified`
    from {pre}
    union all
    select {row}, `_lh_b`, `_lh_kind`, `_lh_unmodified` from versions
)""",
        f"""fates as (
    -- rule 7: the first later batch whose earliest start for the key is at or before the row's
    -- start removes it; rules 8 and 11: the first batch with an earliest start (later) or a delete
    -- (the row's own batch too) touches it, and closes it if it is active then
    select
        {cols(k, "c")},
        c.{q(START)},
        c.`_lh_b`,
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
    inner join events as ev on {same_key("c", "ev", k)} and ev.`_lh_b` >= c.`_lh_b`
    group by all
)""",
        f"""firsts as (
    select distinct {by_key}, `_lh_b`, `_lh_first` from versions
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
    inner join candidates as c on {same_key("f", "c", k)} and c.`_lh_b` < f.`_lh_b`
    left join fates as r on {same_key("c", "r", k)} and c.{q(START)} = r.{q(START)} and c.`_lh_b` = r.`_lh_b`
    where r.`_lh_removed` is null or r.`_lh_removed` > f.`_lh_b`
    group by all
)""",
        f"""resolved as (
    -- rules 9, 10: replace rows as sent; an update with no previous version is ignored; the
    -- deleted column is never inherited
    select
        {cols(k, "v")},
        {resolved_columns},
        {cols(SYSTEM, "v")},
        v.`_lh_b`
    from versions as v
    left join bases as b on {same_key("v", "b", k)} and v.`_lh_b` = b.`_lh_b`
    where v.`_lh_kind` = 'replace' or v.`_lh_replace_before` is not null or b.`_lh_has_base`
)""",
        f"""lives as (
    select
        r.*,
        f.`_lh_removed`,
        f.`_lh_touch`,
        r.{q(ACTIVE)} and f.`_lh_touch` is not null
            and (f.`_lh_removed` is null or f.`_lh_touch`.b < f.`_lh_removed`) as `_lh_closes`
    from (
        select {row}, 0 as `_lh_b` from {pre}
        union all
        select {row}, `_lh_b` from resolved
    ) as r
    left join fates as f on {same_key("r", "f", k)} and r.{q(START)} = f.{q(START)} and r.`_lh_b` = f.`_lh_b`
)""",
        f"""pieces as (
    -- a row's content until it is closed or removed, then its closed content until removed
    select {row}, `_lh_b` as `_lh_from`, case when `_lh_closes` then `_lh_touch`.b else `_lh_removed` end as `_lh_to`
    from lives
    where not (`_lh_closes` and `_lh_touch`.b = `_lh_b`)
    union all
    select
        {cols(k)}, {closed_data}, {q(START)}, `_lh_touch`.end as {q(END)}, false as {q(ACTIVE)}, {q(SYNCED)},
        `_lh_touch`.b as `_lh_from`,
        `_lh_removed` as `_lh_to`
    from lives
    where `_lh_closes`
)""",
        f"""ordered as (
    select
        p.*,
        {content} as `_lh_content`,
        lag(`_lh_to`) over (partition by {by_key}, {q(START)} order by `_lh_from`) as `_lh_prev_to`,
        lag({content}) over (partition by {by_key}, {q(START)} order by `_lh_from`) as `_lh_prev_content`
    from pieces as p
)""",
        f"""runs as (
    -- pieces of one (key, start) that follow each other with equal content are one row
    select
        o.*,
        sum(case when `_lh_prev_to` = `_lh_from` and `_lh_prev_content` <=> `_lh_content` then 0 else 1 end) over (
            partition by {by_key}, {q(START)} order by `_lh_from` rows between unbounded preceding and current row
        ) as `_lh_run`,
        `_lh_prev_content` is not null and (`_lh_prev_to` is null or `_lh_prev_to` > `_lh_from`) as `_lh_clash`
    from ordered as o
)""",
        f"""physical as (
    select {row}, min(`_lh_from`) as `_lh_from`, max_by(`_lh_to`, `_lh_from`) as `_lh_to`
    from runs
    group by {row}, `_lh_run`
)""",
    ]
    ctes += _stored_diff_ctes(layout, rewritten=truncate or bool(schema_changes))
    nulls = ", ".join(f"cast(null as {layout.types[c]}) as {q(c)}" for c in layout.data)
    system_nulls = (
        f"cast(null as timestamp) as {q(START)}, cast(null as timestamp) as {q(END)},"
        f" cast(null as boolean) as {q(ACTIVE)}, cast(null as timestamp) as {q(SYNCED)}"
    )
    end_nulls = (
        f"cast(null as timestamp) as {q(END)}, cast(null as boolean) as {q(ACTIVE)},"
        f" cast(null as timestamp) as {q(SYNCED)}"
    )
    key_nulls = ", ".join(f"cast(null as {layout.types[c]}) as {q(c)}" for c in k)
    return (
        "with\n"
        + ",\n\n".join(ctes)
        + f"""

select 'close' as `_lh_action`, {row}, `_lh_from`, `_lh_to`, `_lh_gone`
from ends where `_lh_stored` and `_lh_to` is not null
union all
select 'insert' as `_lh_action`, {row}, `_lh_from`, `_lh_to`, `_lh_gone`
from ends where not `_lh_stored`
union all
select 'clash' as `_lh_action`, {cols(k)}, {nulls}, {q(START)}, {end_nulls}, `_lh_from`, null, null
from runs where `_lh_clash`
union all
select distinct 'interleave' as `_lh_action`, {key_nulls}, {nulls}, {system_nulls}, `_lh_b`, null, null
from bases as b inner join firsts as f using ({by_key}, `_lh_b`) where b.`_lh_top` > f.`_lh_first`
"""
    )


def _stored_diff_ctes(layout: Layout, rewritten: bool) -> list[str]:
    """`ends`: every physical row with `_lh_stored` (the table holds it now) and `_lh_gone`.
    Without a rewrite, the runs from batch 0 are the stored rows themselves. A truncate or schema
    change of the first batch may rewrite or remove stored rows: a stored row whose run from
    batch 0 has other content, or none, is closed by batch 1, and that run is new from batch 1."""
    k = layout.keys
    row = ", ".join(q(c) for c in layout.row)
    if not rewritten:
        rows = f"""rows_after as (
    select {row}, `_lh_from`, `_lh_to`, `_lh_from` = 0 as `_lh_stored` from physical
)"""
    else:
        content = " and ".join(f"s.{q(c)} <=> p.{q(c)}" for c in layout.content)
        rows = f"""kept_stored as (
    select {cols(layout.row, "s")}, p.`_lh_to`, p.`_lh_from` is not null as `_lh_same`
    from stored_rows as s
    left join physical as p
        on p.`_lh_from` = 0 and {same_key("s", "p", k)} and s.{q(START)} = p.{q(START)} and {content}
),

rows_after as (
    select {row}, 0 as `_lh_from`, case when `_lh_same` then `_lh_to` else 1 end as `_lh_to`, true as `_lh_stored`
    from kept_stored
    union all
    select {cols(layout.row, "p")}, greatest(p.`_lh_from`, 1) as `_lh_from`, p.`_lh_to`, false as `_lh_stored`
    from physical as p
    left anti join kept_stored as s
        on p.`_lh_from` = 0 and s.`_lh_same` and {same_key("s", "p", k)} and s.{q(START)} = p.{q(START)}
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


def _truncate_cte(layout: Layout, source: str) -> str:
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


def _schema_change_ctes(layout: Layout, source: str, index: int, row_number: int, op: str, column: str) -> list[str]:
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
