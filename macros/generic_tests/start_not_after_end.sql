{#- Every interval starts no later than it ends. A NULL end is open and always later. -#}
{% test start_not_after_end(model, key, start, end) %}
  {{ return(adapter.dispatch('test_start_not_after_end', 'lakehistory')(model, key, start, end)) }}
{% endtest %}

{% macro default__test_start_not_after_end(model, key, start, end) %}
{%- set s = adapter.quote(start) -%}
{%- set e = adapter.quote(end) -%}
{%- set keyed = lakehistory._test_columns(key) | map('lower') | list %}
select
    {{ lakehistory._test_select(key) }},
    {%- if start | lower not in keyed %}
    {{ s }},
    {%- endif %}
    {%- if end | lower not in keyed %}
    {{ e }},
    {%- endif %}
    concat(
        {{ lakehistory._test_describe(key) }},
        case
            when {{ s }} is null then ': {{ start }} is NULL'
            else concat(': starts at ', cast({{ s }} as string), ' after it ends at ', cast({{ e }} as string))
        end
    ) as problem
from {{ model }}
where {{ s }} is null or {{ s }} > {{ e }}
{% endmacro %}
