{#- An `_hx` table only grows: its ids (the tested column) are unique and increase with the order
    the rows were recorded in, so every transaction's ids are above all ids of the transactions
    recorded before it. -#}
{% test hx_append_only(model, column_name, transaction='txn_id') %}
  {{ return(adapter.dispatch('test_hx_append_only', 'lakehistory')(model, column_name, transaction)) }}
{% endtest %}

{% macro default__test_hx_append_only(model, column_name, transaction='txn_id') %}
{%- set id = adapter.quote(column_name) -%}
{%- set txn = adapter.quote(transaction) %}
with per_transaction as (
    select
        {{ txn }} as txn,
        min({{ id }}) as first_id,
        max({{ id }}) as last_id
    from {{ model }}
    group by {{ txn }}
),

ordered as (
    select
        txn,
        first_id,
        last_id,
        max(last_id) over (order by txn rows between unbounded preceding and 1 preceding) as earlier_last_id
    from per_transaction
)

select
    cast(null as bigint) as id,
    txn as {{ txn }},
    concat(
        {{ lakehistory._text(transaction ~ ' ') }}, coalesce(cast(txn as string), 'NULL'), ' recorded ids from ', cast(first_id as string),
        ', not above the ids of earlier transactions (up to ', cast(earlier_last_id as string), ')'
    ) as problem
from ordered
where txn is null or first_id <= earlier_last_id

union all

select
    {{ id }} as id,
    min({{ txn }}) as {{ txn }},
    concat(
        {{ lakehistory._text(column_name ~ ' ') }}, coalesce(cast({{ id }} as string), 'NULL'), ' appears ', cast(count(*) as string),
        {{ lakehistory._text(' times (' ~ transaction ~ ' ') }}, array_join(array_sort(collect_set(cast({{ txn }} as string))), ', '), ')'
    ) as problem
from {{ model }}
group by {{ id }}
having count(*) > 1 or {{ id }} is null
{% endmacro %}
