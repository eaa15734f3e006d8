{#- In an event history, every update is one `update_from` row and one `update_to` row of the same
    key, transaction and valid time (a transaction may update a key at several valid times). -#}
{% test update_pairs(model, key, event='_hist_event', transaction='_hist_trans_id', update_from=3, update_to=4, valid_time='_hist_valid_time') %}
  {{ return(adapter.dispatch('test_update_pairs', 'lakehistory')(model, key, event, transaction, update_from, update_to, valid_time)) }}
{% endtest %}

{% macro default__test_update_pairs(model, key, event='_hist_event', transaction='_hist_trans_id', update_from=3, update_to=4, valid_time='_hist_valid_time') %}
{%- set k = lakehistory._test_select(key) -%}
{%- set ev = adapter.quote(event) -%}
{%- set txn = adapter.quote(transaction) -%}
{%- set at = adapter.quote(valid_time) if valid_time else 'cast(null as timestamp)' %}
select
    {{ k }},
    {{ txn }},
    `valid_time`,
    concat(
        {{ lakehistory._test_describe(key) }}, ', {{ transaction }}=', coalesce(cast({{ txn }} as string), 'NULL'),
        ', valid time ', coalesce(cast(`valid_time` as string), 'NULL'), ': ',
        cast(froms as string), ' update_from and ', cast(tos as string), ' update_to events, not one of each'
    ) as problem
from (
    select
        {{ k }},
        {{ txn }},
        {{ at }} as `valid_time`,
        count_if({{ ev }} = {{ update_from | int }}) as froms,
        count_if({{ ev }} = {{ update_to | int }}) as tos
    from {{ model }}
    where {{ ev }} in ({{ update_from | int }}, {{ update_to | int }})
    group by {{ k }}, {{ txn }}, {{ at }}
) as updates
where froms != 1 or tos != 1
{% endmacro %}
