{#- A row is active exactly when its end is the open end (Fivetran: 9999-12-31T23:59:59.999Z). -#}
{% test active_iff_open_end(model, key, active='_fivetran_active', end='_fivetran_end', open_end="timestamp'9999-12-31 23:59:59.999'") %}
  {{ return(adapter.dispatch('test_active_iff_open_end', 'lakehistory')(model, key, active, end, open_end)) }}
{% endtest %}

{% macro default__test_active_iff_open_end(model, key, active='_fivetran_active', end='_fivetran_end', open_end="timestamp'9999-12-31 23:59:59.999'") %}
{%- set a = adapter.quote(active) -%}
{%- set e = adapter.quote(end) -%}
{%- set is_open = (e ~ ' is null') if open_end | lower == 'null' else ('coalesce(' ~ e ~ ' = ' ~ open_end ~ ', false)') %}
select
    {{ lakehistory._test_select(key) }},
    {{ e }},
    {{ a }},
    concat(
        {{ lakehistory._test_describe(key) }}, ', {{ end }}=', coalesce(cast({{ e }} as string), 'NULL'),
        case
            when {{ a }} is null then ': {{ active }} is NULL'
            when {{ a }} then ': active, but its end is not the open end'
            else ': not active, but its end is the open end'
        end
    ) as problem
from {{ model }}
where {{ a }} is null or ({{ a }} and not ({{ is_open }})) or (not {{ a }} and {{ is_open }})
{% endmacro %}
