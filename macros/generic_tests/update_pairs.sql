{#- In an event history, every update is one `update_from` row and one `update_to` row of the same
    key in the same transaction. -#}
{% test update_pairs(model, key, event='_hist_event', transaction='_hist_trans_id', update_from=3, update_to=4) %}
  {{ return(adapter.dispatch('test_update_pairs', 'lakehistory')(model, key, event, transaction, update_from, update_to)) }}
{% endtest %}

{% macro default__test_update_pairs(model, key, event='_hist_event', transaction='_hist_trans_id', update_from=3, update_to=4) %}
{%- set k = lakehistory._test_select(key) -%}
{%- set ev = adapter.quote(event) -%}
{%- set txn = adapter.quote(transaction) %}
select
    {{ k }},
    {{ txn }},
    concat(
        {{ lakehistory._test_describe(key) }}, ', {{ transaction }}=', coalesce(cast({{ txn }} as string), 'NULL'), ': ',
        cast(froms as string), ' update_from and ', cast(tos as string), ' update_to events, not one of each'
    ) as problem
from (
    select
        {{ k }},
        {{ txn }},
        count_if({{ ev }} = {{ update_from | int }}) as froms,
        count_if({{ ev }} = {{ update_to | int }}) as tos
    from {{ model }}
    where {{ ev }} in ({{ update_from | int }}, {{ update_to | int }})
    group by {{ k }}, {{ txn }}
) as updates
where froms != 1 or tos != 1
{% endmacro %}
