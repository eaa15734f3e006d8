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
  version (valid_to at or after the first one, a range Delta skips files by), in one scan; one
  aggregate and one window (a shuffle each) then compare and chain the points. -#}
{% macro _version_changes_ctes(history, columns, first) %}
  {%- set keys = lakehistory.history_keys(history) -%}
  {%- set lo = first if first is not none else lakehistory.end_of_time() -%}
  {%- set key_list = lakehistory._columns(keys, none) -%}
  {%- set valid_to = lakehistory.valid_to_sql('h') -%}
  {%- set point = "named_struct('gone', `gone`, 'row', `row`)" -%}
touched as (
    select distinct `txn_id`, `version`, {{ key_list }}
    from moved
),

candidates as (
    -- each touched key's versions just before its transaction (`after` false) and just after,
    -- as points: the version's start, and after an ended version a deletion, which a version
    -- starting at the same instant overrides (then it was superseded, not deleted)
    select t.`txn_id`, {{ lakehistory._columns(keys, 'h') }}, s.`after`, c.`t`, c.`gone`,
        struct({{ lakehistory._columns(columns, 'h') }}) as `row`
    from {{ lakehistory.versioned(history) }} as h
    inner join touched as t on {{ lakehistory._join_on('h', 't', keys) }}
    lateral view explode(array(
        case when h.`valid_from` <= t.`version` and {{ valid_to }} > t.`version` then true end,
        case when h.`valid_from` < t.`version` and {{ valid_to }} >= t.`version` then false end
    )) s as `after`
    lateral view explode(array(
        named_struct('t', h.`_fivetran_start`, 'gone', false),
        case when not h.`_fivetran_active`
            then named_struct('t', h.`_fivetran_end` + interval 1 millisecond, 'gone', true) end
    )) p as c
    where {{ valid_to }} >= {{ lo }} and s.`after` is not null and c is not null
),

compared as (
    -- per key and instant, its point after the transaction (`pa`) and before it (`pb`)
    select
        `txn_id`, {{ key_list }}, `t`,
        coalesce(
            any_value(case when `after` and not `gone` then {{ point }} end, true),
            any_value(case when `after` then {{ point }} end, true)
        ) as `pa`,
        coalesce(
            any_value(case when not `after` and not `gone` then {{ point }} end, true),
            any_value(case when not `after` then {{ point }} end, true)
        ) as `pb`
    from candidates
    group by `txn_id`, {{ key_list }}, `t`
),

ordered as (
    select
        c.*,
        -- t0: the first instant where the points after the transaction differ from those before
        min(case when not (c.`pa` <=> c.`pb`) then c.`t` end) over w_all as `t0`,
        last(c.`pa`, true) over w_before as `prev_pa`,
        last(c.`pa`, true) over w_all as `last_pa`,
        last(c.`pb`, true) over w_all as `last_pb`,
        max(case when c.`pa` is not null then c.`t` end) over w_all as `last_pa_t`,
        c.`t` = max(c.`t`) over w_all as `is_last`
    from compared as c
    window
        w_all as (partition by c.`txn_id`, {{ lakehistory._columns(keys, 'c') }} order by c.`t`
            rows between unbounded preceding and unbounded following),
        w_before as (partition by c.`txn_id`, {{ lakehistory._columns(keys, 'c') }} order by c.`t`
            rows between unbounded preceding and 1 preceding)
),

marked as (
    -- withdrawn: the transaction took back the key's latest points, none after t0 remains
    select o.*, o.`is_last` and (o.`last_pa_t` is null or o.`last_pa_t` < o.`t0`) as `withdrawn`
    from ordered as o
    where o.`t0` is not null
),

version_changes as (
    select
        m.`txn_id`,
        {{ lakehistory._columns(keys, 'm') }},
        case
            when m.`withdrawn` then
                case
                    when m.`last_pa` is null or m.`last_pa`.`gone` then 'delete'
                    when m.`last_pb` is null or m.`last_pb`.`gone` then 'insert'
                    else 'update'
                end
            when m.`pa`.`gone` then 'delete'
            when m.`prev_pa` is null or m.`prev_pa`.`gone` then 'insert'
            else 'update'
        end as `kind`,
        case when not m.`withdrawn` then m.`t` when m.`last_pa` is not null then m.`t0` end as `valid_time`,
        case
            when m.`withdrawn` then case when not m.`last_pb`.`gone` then m.`last_pb`.`row` end
            when m.`pa`.`gone` then m.`pa`.`row`
            when not m.`prev_pa`.`gone` then m.`prev_pa`.`row`
        end as `old`,
        case
            when m.`withdrawn` then case when not m.`last_pa`.`gone` then m.`last_pa`.`row` end
            when not m.`pa`.`gone` then m.`pa`.`row`
        end as `new`
    from marked as m
    where
        (not m.`withdrawn` and m.`pa` is not null and m.`t` >= m.`t0`)
        or (
            m.`withdrawn`
            and (not coalesce(m.`last_pa`.`gone`, true) or not coalesce(m.`last_pb`.`gone`, true))
            and not m.`last_pa` <=> m.`last_pb`
        )
)
{%- endmacro %}
