{#-
  A snapshot of daily extracts (a dbt snapshot with meta.lakehistory.extract, captured by
  lakehistory.record_capture) read where a history table goes: by `versioned`, `history_keys` and
  `history_data_columns`, so event histories and feature states (and their retention and change
  log) take either. `as_of` and `history` read a snapshot by its own period (valid time), as before.
-#}

{#- The snapshot node of a project's daily extracts (a dbt snapshot with meta.lakehistory.extract)
    whose table is `relation`, or none. -#}
{% macro _extract_snapshot_node(relation) %}
  {%- if not execute -%}{{ return(none) }}{%- endif -%}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'snapshot' and (node.config.meta or {}).get('lakehistory', {}).get('extract')
        and node.alias == relation.identifier and node.schema == relation.schema -%}
      {{- return(node) -}}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}


{#- A snapshot of daily extracts read as the history table its captures would have made, in
    transaction time: the events and states read it so. Each capture is a transaction (lakehistory.record_capture: operation 'snapshot', batch_id its
    day); the capture on a version's dbt_valid_from day opened it, the one on its dbt_valid_to day
    closed it. A version is active (_fivetran_end the open end) from the capture that opened it
    to the one that closed it; from then on, as in a history table, it stays as a closed version
    that ends 1 ms before the next one starts (or the key's deletion record does). Deletion records
    (hard_deletes: new_record) are no versions; they only end the one before. -#}
{% macro _snapshot_as_history(relation) %}
  {%- set version = 'txn_id' if lakehistory.version_type() == 'integer' else 'started_at' -%}
  {#- a publish's row of several captures lists their days in its parts -#}
  {%- set captures = "(select `day`, max(`version`) as `version` from (select explode(coalesce("
      ~ "transform(`parts`, p -> p.`batch_id`), array(`batch_id`))) as `day`, `" ~ version ~ "` as `version` from "
      ~ lakehistory.transactions_relation() ~ " where `history_table` = " ~ lakehistory._text(relation)
      ~ " and `operation` = 'snapshot') group by `day`)" -%}
  {%- set system = lakehistory._reserved_columns('extract') -%}
  {%- set names = adapter.get_columns_in_relation(relation) | map(attribute='name') | list -%}
  {%- set columns = names | reject('in', system) | list -%}
  {%- set deleted = "coalesce(x.`dbt_is_deleted` = 'True', false)" if 'dbt_is_deleted' in names else 'false' -%}
  {%- set open = 'cast(' ~ lakehistory.open_version() ~ ' as ' ~ lakehistory.version_sql_type() ~ ')' -%}
  {{- return(
      "(select " ~ lakehistory._columns(columns, 'x') ~ ", x.`dbt_valid_from` as `_fivetran_start`,"
      ~ " case when x.`copy`.`closed` then x.`dbt_valid_to` - interval 1 millisecond else "
      ~ lakehistory._names()['fivetran_end_of_time'] ~ " end as `_fivetran_end`,"
      ~ " not x.`copy`.`closed` as `_fivetran_active`, cast(null as timestamp) as `_fivetran_synced`,"
      ~ " x.`copy`.`valid_from` as `valid_from`, x.`copy`.`valid_to` as `valid_to`"
      ~ " from (select r.*, explode(array("
      ~ "named_struct('closed', false, 'valid_from', o.`version`, 'valid_to', coalesce(c.`version`, " ~ open ~ ")),"
      ~ " case when c.`version` is not null then named_struct('closed', true, 'valid_from', c.`version`, 'valid_to', "
      ~ open ~ ") end)) as `copy`"
      ~ " from " ~ relation ~ " as r"
      ~ " inner join " ~ captures ~ " as o on o.`day` = date_format(r.`dbt_valid_from`, 'yyyy-MM-dd')"
      ~ " left join " ~ captures ~ " as c on c.`day` = date_format(r.`dbt_valid_to`, 'yyyy-MM-dd')) as x"
      ~ " where x.`copy` is not null and not " ~ deleted ~ ")") -}}
{% endmacro %}
