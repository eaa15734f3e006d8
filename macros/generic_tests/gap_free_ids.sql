{#- The column holds the ids first_id, first_id + 1, ..., n: each once (once per value of the
    column `per`, when given: a transaction has a row per table), none missing. -#}
{% test gap_free_ids(model, column_name, first_id=1, per=none) %}
  {{ return(adapter.dispatch('test_gap_free_ids', 'lakehistory')(model, column_name, first_id, per)) }}
{% endtest %}

{% macro default__test_gap_free_ids(model, column_name, first_id=1, per=none) %}
{%- set c = adapter.quote(column_name) %}
with ids as (
    select {{ c }} as id, {{ adapter.quote(per) if per else 'null' }} as per
    from {{ model }}
),

expected as (
    select explode(sequence(cast({{ first_id | int }} as bigint), last_id)) as id
    from (select max(id) as last_id from ids) as bounds
    where last_id >= {{ first_id | int }}
),

missing as (
    select
        expected.id,
        concat({{ lakehistory._text(column_name ~ ' ') }}, cast(expected.id as string), ' is missing') as problem
    from expected
    left anti join ids on expected.id = ids.id
),

repeated as (
    select
        id,
        concat({{ lakehistory._text(column_name ~ ' ') }}, coalesce(cast(id as string), 'NULL'), ' appears ', cast(count(*) as string), ' times'
            {%- if per %}, ' for ', {{ lakehistory._text(per ~ ' ') }}, coalesce(cast(per as string), 'NULL'){% endif %}) as problem
    from ids
    where id is not null
    group by id, per
    having count(*) > 1
),

unexpected as (
    select
        id,
        concat({{ lakehistory._text(column_name ~ ' ') }}, coalesce(cast(id as string), 'NULL'), ' is not an id from {{ first_id | int }} on') as problem
    from ids
    where id is null or id < {{ first_id | int }}
)

select * from missing
union all
select * from repeated
union all
select * from unexpected
{% endmacro %}
