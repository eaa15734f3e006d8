{#- At most one active row per key. With transaction time (`valid_from`, `valid_to`), at most one
    in every version: no two active rows of a key are in the table at the same time. -#}
{% test one_active_row_per_key(model, key, active='_fivetran_active', valid_from=none, valid_to=none) %}
  {{ return(adapter.dispatch('test_one_active_row_per_key', 'lakehistory')(model, key, active, valid_from, valid_to)) }}
{% endtest %}

{% macro default__test_one_active_row_per_key(model, key, active='_fivetran_active', valid_from=none, valid_to=none) %}
{%- set k = lakehistory._test_select(key) -%}
{%- set a = adapter.quote(active) -%}
{%- if valid_from is none %}
select
    {{ k }},
    concat({{ lakehistory._test_describe(key) }}, ': ', cast(count(*) as string), ' active rows') as problem
from {{ model }}
where {{ a }}
group by {{ k }}
having count(*) > 1
{%- else %}
{%- set vf = adapter.quote(valid_from) -%}
{%- set vt = adapter.quote(valid_to or 'valid_to') %}
-- Sorted by valid_from, two active rows of a key share a version exactly when one of them starts
-- before the one sorted just before it ends (NULL valid_to: still open).
select
    {{ k }},
    concat(
        {{ lakehistory._test_describe(key) }}, ': active rows overlap in transaction time, [',
        cast(previous_from as string), ', ', coalesce(cast(previous_to as string), 'open'), ') and [',
        cast({{ vf }} as string), ', ', coalesce(cast({{ vt }} as string), 'open'), ')'
    ) as problem
from (
    select
        {{ k }},
        {{ vf }},
        {{ vt }},
        lag({{ vf }}) over (partition by {{ k }} order by {{ vf }}, {{ vt }} nulls last) as previous_from,
        lag({{ vt }}) over (partition by {{ k }} order by {{ vf }}, {{ vt }} nulls last) as previous_to,
        row_number() over (partition by {{ k }} order by {{ vf }}, {{ vt }} nulls last) as position
    from {{ model }}
    where {{ a }}
) as active_rows
where position > 1 and (previous_to is null or previous_to > {{ vf }})
{%- endif %}
{% endmacro %}
