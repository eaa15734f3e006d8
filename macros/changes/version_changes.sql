{#- After `_changes_ctes`: the CTE `version_changes`, in the shape of `changes`, with one change per
    point of a key's valid-time history that a transaction added or rewrote (the event history's
    grain, event_history.sql).

  A key's points, as known at a version, are the starts of its Fivetran versions and, after a
  version that ends with no version starting 1 ms later, its deletion (end + 1 ms). For each key a
  pending transaction touched, its points just before and just after the transaction are
  compared; from the first instant t0 where they differ, every point after is a change, paired
  with the point before it: an insert (first point, or after a deletion), an update, a delete.
  So a batch that brings several versions of a key gives one change each, and a late version
  gives its own change and restates the one after it, whose previous values it rewrote.

  When the transaction instead took back the key's latest points (a revert), nothing after t0
  remains: one change at t0 goes from the key's last state before to its last state after (a
  delete with no valid time when the key has no row left).

  Replaying the changes in (transaction, valid time) order thus leaves every key as the table
  has it after each transaction. The reads are the rows of the touched keys live at a pending
  version (valid_to at or after the first one, a range Delta skips files by). -#}
{% macro _version_changes_ctes(history, first) %}
  {%- set keys = lakehistory.history_keys(history) -%}
  {%- set columns = lakehistory.history_data_columns(history) -%}
  {%- set rows = lakehistory.versioned(history) -%}
  {%- set lo = first if first is not none else lakehistory.end_of_time() -%}
  {%- set key_list = lakehistory._columns(keys, none) -%}
  {%- set by_key = 'partition by `txn_id`, `after`, ' ~ key_list ~ ' order by `t`' -%}
  {%- set last_first = 'partition by `txn_id`, `after`, ' ~ key_list ~ ' order by `t` desc' -%}
  {%- set valid_to = lakehistory.valid_to_sql('h') -%}
  {%- set end_plus = '`_fivetran_end` + interval 1 millisecond' -%}
touched as (
    select distinct x.`txn_id`, p.`version`, {{ lakehistory._columns(keys, 'x') }}
    from (
        select `txn_id`, {{ key_list }} from opened
        union all
        select `txn_id`, {{ key_list }} from closed
    ) as x
    inner join pending as p on x.`txn_id` = p.`txn_id`
),

sides as (
    -- each touched key's versions just before its transaction and just after
    select t.`txn_id`, s.`after`, h.`_fivetran_start`, h.`_fivetran_end`, h.`_fivetran_active`,
        {{ lakehistory._columns(keys, 'h') }}, struct({{ lakehistory._columns(columns, 'h') }}) as `row`
    from {{ rows }} as h
    inner join touched as t on {{ lakehistory._join_on('h', 't', keys) }}
    inner join (select true as `after` union all select false) as s
        on case when s.`after` then h.`valid_from` <= t.`version` and {{ valid_to }} > t.`version`
            else h.`valid_from` < t.`version` and {{ valid_to }} >= t.`version` end
    where {{ valid_to }} >= {{ lo }}
),

points as (
    select `txn_id`, `after`, {{ key_list }}, `_fivetran_start` as `t`, false as `gone`, `row`
    from sides
    union all
    -- a deletion: a version that ends with no version of the key starting 1 ms later
    select e.`txn_id`, e.`after`, {{ lakehistory._columns(keys, 'e') }}, e.{{ end_plus }} as `t`, true as `gone`, e.`row`
    from sides as e
    left anti join sides as n
        on n.`txn_id` = e.`txn_id` and n.`after` = e.`after` and {{ lakehistory._join_on('n', 'e', keys) }}
        and n.`_fivetran_start` = e.{{ end_plus }}
    where not e.`_fivetran_active`
),

rewritten as (
    -- t0: the first instant where a key's points after its transaction differ from those before
    select coalesce(a.`txn_id`, b.`txn_id`) as `txn_id`,
        {% for k in keys %}coalesce(a.{{ adapter.quote(k) }}, b.{{ adapter.quote(k) }}) as {{ adapter.quote(k) }}, {% endfor %}
        min(coalesce(a.`t`, b.`t`)) as `t0`
    from (select * from points where `after`) as a
    full outer join (select * from points where not `after`) as b
        on a.`txn_id` = b.`txn_id` and {{ lakehistory._join_on('a', 'b', keys) }} and a.`t` = b.`t`
    where not (a.`gone` <=> b.`gone` and a.`row` <=> b.`row`)
    group by 1, {% for k in keys %}{{ loop.index + 1 }}{{ ', ' if not loop.last }}{% endfor %}
),

chained as (
    select p.*,
        lag(`t`) over ({{ by_key }}) as `prev_t`,
        lag(`gone`) over ({{ by_key }}) as `prev_gone`,
        lag(`row`) over ({{ by_key }}) as `prev_row`,
        row_number() over ({{ last_first }}) = 1 as `is_last`
    from points as p
),

version_changes as (
    select
        c.`txn_id`,
        {{ lakehistory._columns(keys, 'c') }},
        case when c.`gone` then 'delete' when c.`prev_t` is null or c.`prev_gone` then 'insert' else 'update' end as `kind`,
        c.`t` as `valid_time`,
        case when c.`gone` then c.`row` when c.`prev_t` is not null and not c.`prev_gone` then c.`prev_row` end as `old`,
        case when not c.`gone` then c.`row` end as `new`
    from chained as c
    inner join rewritten as r on c.`txn_id` = r.`txn_id` and {{ lakehistory._join_on('c', 'r', keys) }}
    where c.`after` and c.`t` >= r.`t0`

    union all

    -- a transaction that took back a key's latest points: its last state before to its last after
    select
        r.`txn_id`,
        {{ lakehistory._columns(keys, 'r') }},
        case when la.`row` is null or la.`gone` then 'delete' when lb.`row` is null or lb.`gone` then 'insert' else 'update' end,
        case when la.`row` is not null then r.`t0` end,
        case when lb.`row` is not null and not lb.`gone` then lb.`row` end,
        case when la.`row` is not null and not la.`gone` then la.`row` end
    from rewritten as r
    left join (select * from chained where `after` and `is_last`) as la
        on la.`txn_id` = r.`txn_id` and {{ lakehistory._join_on('la', 'r', keys) }}
    left join (select * from chained where not `after` and `is_last`) as lb
        on lb.`txn_id` = r.`txn_id` and {{ lakehistory._join_on('lb', 'r', keys) }}
    where (la.`t` is null or la.`t` < r.`t0`)
        and not ((la.`row` is null or la.`gone`) and (lb.`row` is null or lb.`gone`))
        and not (la.`gone` <=> lb.`gone` and la.`row` <=> lb.`row`)
)
{%- endmacro %}
