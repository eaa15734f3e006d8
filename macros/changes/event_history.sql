{#-
  Event history (seed 001, ESQL): what happened to a table, event by event, transaction by
  transaction. Three macros:

    event_history(history)             the body of an incremental model: the table's data columns
                                       plus _hist_trans_id, _hist_user, _hist_event, _hist_time and
                                       _hist_valid_time, one row per event
    core_history({name: events, ...})  the body of an incremental model: one row per transaction,
                                       table and event kind (ESQL `_core.history`)
    column_changes(events, from, to)   one row per changed column of the events recorded in
                                       [from, to) (ESQL `history(table, from, to)`)

  Events are the changes of each key's valid-time history, one per version a transaction brings
  (version_changes.sql): an insert is one row with _hist_event 1 and the new values, a delete one
  row with 2 and the last values, an update two rows with the same transaction and valid time, 3
  (update_from, the old values) and 4 (update_to, the new ones).
  _hist_time is the transaction's time (transaction time: its started_at, shared by all its
  events), _hist_valid_time when the change happened at the source (valid time). Replayed in
  (_hist_trans_id, _hist_valid_time) order, they give the table as of every transaction.

      {{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}
      {{ lakehistory.event_history(ref('meta_station_history')) }}
-#}

{% macro event_history(history) %}
  {#- read while dbt parses the model: its table carries the history's NOT NULL columns -#}
  {%- do config(post_hook='{{ lakehistory._carry_not_null() }}') -%}
  {{ return(adapter.dispatch('event_history', 'lakehistory')(history)) }}
{% endmacro %}

{% macro default__event_history(history) %}
  {%- do lakehistory._refuse_full_refresh('an event history') -%}
  {%- if not execute or load_relation(history) is none -%}
    {{ return(lakehistory._not_built_yet(history)) }}
  {%- endif -%}
  {%- set columns = lakehistory._data_columns_without(history, 'events') -%}
  {%- do lakehistory._follow_history(history, 'events', columns) -%}
  {%- set last = lakehistory._last_recorded_txn('_hist_trans_id') -%}
  {%- set first = lakehistory._first_pending_version(history, last) -%}
  {%- if first is none and is_incremental() -%}
    {{ return(lakehistory._nothing_to_append()) }}
  {%- endif -%}
with {{ lakehistory._changes_ctes(history, columns, last, first, paired=false) }},

{{ lakehistory._version_changes_ctes(history, columns, first) }},

events as (
    select
        c.`txn_id`,
        c.`valid_time`,
        explode(case c.`kind`
            when 'insert' then array(named_struct('code', 1, 'row', c.`new`))
            when 'delete' then array(named_struct('code', 2, 'row', c.`old`))
            else array(named_struct('code', 3, 'row', c.`old`), named_struct('code', 4, 'row', c.`new`))
        end) as `event`
    from version_changes as c
)

select
    e.`event`.`row`.*,
    e.`txn_id` as `_hist_trans_id`,
    coalesce(p.`author`, p.`app_id`) as `_hist_user`,
    e.`event`.`code` as `_hist_event`,
    p.`started_at` as `_hist_time`,
    e.`valid_time` as `_hist_valid_time`
from events as e
inner join pending as p on e.`txn_id` = p.`txn_id`
{% endmacro %}


{#- `tables`: a mapping of table name to its events model, e.g.
    {'meta_station': ref('meta_station_events'), ...}. Each events model is read from its own
    last recorded transaction on, so a model built late is still caught up. Every other table a
    transaction changed (from the transactions table: a history table or a snapshot of extracts
    with no events model in `tables`) is listed too, once per transaction, with event NULL
    ('changed') and the history rows the transaction opened, so the model answers "which tables
    did transaction X touch?" for every table. -#}
{% macro core_history(tables) %}
  {{ return(adapter.dispatch('core_history', 'lakehistory')(tables)) }}
{% endmacro %}

{% macro default__core_history(tables) %}
  {%- do lakehistory._refuse_full_refresh('the record of which tables each transaction touched') -%}
  {%- set parts = [] -%}
  {%- set covered = [] -%}
  {%- for name, events in tables.items() -%}
    {%- set after = 0 -%}
    {%- if execute and is_incremental() -%}
      {#- a literal, so the events table's scan skips the files of transactions already counted -#}
      {%- set after = run_query("select coalesce(max(`trans_id`), 0) from " ~ this ~ " where `table_name` = "
          ~ lakehistory._text(name)).rows[0][0] | int -%}
    {%- endif -%}
    {%- do covered.extend(lakehistory._events_source_tables(events)) -%}
    {%- do parts.append(
        "select `_hist_trans_id` as `trans_id`, `_hist_user` as `user_name`, " ~ lakehistory._text(name)
        ~ " as `table_name`, `_hist_event` as `event`, `_hist_time` as `at`, count(*) as `rows_changed`\nfrom "
        ~ events ~ "\nwhere `_hist_trans_id` > " ~ after
        ~ "\ngroup by `_hist_trans_id`, `_hist_user`, `_hist_event`, `_hist_time`") -%}
  {%- endfor -%}
  {%- set after = 0 -%}
  {%- if execute and is_incremental() -%}
    {%- set after = run_query("select coalesce(max(`trans_id`), 0) from " ~ this ~ " where `event` is null").rows[0][0] | int -%}
  {%- endif -%}
  {%- set quoted = [] -%}
  {%- for table in covered -%}{%- do quoted.append(lakehistory._text(table)) -%}{%- endfor -%}
  {%- set others = ('t.`history_table` not in (' ~ (quoted | join(', ')) ~ ')') if quoted else 'true' -%}
  {%- do parts.append(
      "select t.`txn_id` as `trans_id`, coalesce(t.`author`, t.`app_id`) as `user_name`,"
      ~ " coalesce(t.`source_table`, t.`history_table`) as `table_name`, cast(null as int) as `event`,"
      ~ " t.`started_at` as `at`, t.`versions_opened` as `rows_changed`\nfrom " ~ lakehistory.transactions_relation() ~ " as t"
      ~ "\nwhere t.`txn_id` > " ~ after ~ " and t.`operation` in ('batch', 'edit', 'revert', 'snapshot', 'cleanup') and "
      ~ lakehistory._moved_rows('t') ~ " and " ~ others
      ~ " and coalesce(t.`app_id`, '') <> 'lakehistory.retention'") -%}
select
    `trans_id`,
    `user_name`,
    `table_name`,
    `event`,
    case `event` when 1 then 'insert' when 2 then 'delete' when 3 then 'update_from' when 4 then 'update_to' else 'changed' end as `event_name`,
    `at`,
    `rows_changed`
from (
{{ parts | join('\nunion all\n') }}
)
{% endmacro %}


{#- The history tables (as the transactions table names them) an events model is built from. -#}
{% macro _events_source_tables(events) %}
  {%- set found = [] -%}
  {%- if not execute -%}{{ return(found) }}{%- endif -%}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'model' and node.alias == events.identifier and node.schema == events.schema -%}
      {%- for parent_id in node.depends_on.nodes -%}
        {%- set parent = graph.nodes.get(parent_id) -%}
        {%- if parent and parent.resource_type in ('model', 'snapshot') -%}
          {%- do found.append(lakehistory._relation_of(parent)) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- One row per changed column of the events recorded in [from_time, to_time) (transaction time;
    SQL timestamp expressions, none for unbounded): changed_at, txn_id, valid_time, action
    (insert, update, delete), user_name, the key columns, column_name, old_value and new_value
    (as strings). An update lists the columns whose value changed, NULL to value and value to
    NULL included; an insert or a delete lists every non-key column. -#}
{% macro column_changes(events, from_time=none, to_time=none) %}
  {{ return(adapter.dispatch('column_changes', 'lakehistory')(events, from_time, to_time)) }}
{% endmacro %}

{% macro default__column_changes(events, from_time=none, to_time=none) %}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set keys = lakehistory._events_keys(events) -%}
  {%- set system = lakehistory._reserved_columns('events') -%}
  {%- set columns = [] -%}
  {%- for c in adapter.get_columns_in_relation(events) -%}
    {%- if c.name not in keys and c.name not in system -%}{%- do columns.append(c.name) -%}{%- endif -%}
  {%- endfor -%}
  {%- set window = ['true'] -%}
  {%- if from_time is not none -%}{%- do window.append('`_hist_time` >= (' ~ from_time ~ ')') -%}{%- endif -%}
  {%- if to_time is not none -%}{%- do window.append('`_hist_time` < (' ~ to_time ~ ')') -%}{%- endif -%}
  {%- set cells = [] -%}
  {%- for c in columns -%}
    {%- do cells.append("named_struct('column_name', " ~ lakehistory._text(c) ~ ", 'old_value', cast(o." ~ adapter.quote(c)
        ~ " as string), 'new_value', cast(n." ~ adapter.quote(c) ~ " as string))") -%}
  {%- endfor -%}
  {%- set merged_keys = [] -%}
  {%- for k in keys -%}
    {%- do merged_keys.append('coalesce(n.' ~ adapter.quote(k) ~ ', o.' ~ adapter.quote(k) ~ ') as ' ~ adapter.quote(k)) -%}
  {%- endfor -%}
  {%- set in_window = "(select * from " ~ events ~ " where " ~ (window | join(' and ')) -%}
  {%- set sql -%}
(select
    `changed_at`, `txn_id`, `valid_time`, `action`, `user_name`, {{ lakehistory._columns(keys, none) }},
    `cell`.`column_name`, `cell`.`old_value`, `cell`.`new_value`
from (
    select
        coalesce(n.`_hist_time`, o.`_hist_time`) as `changed_at`,
        coalesce(n.`_hist_trans_id`, o.`_hist_trans_id`) as `txn_id`,
        coalesce(n.`_hist_valid_time`, o.`_hist_valid_time`) as `valid_time`,
        case when o.`_hist_event` is null then 'insert' when n.`_hist_event` is null then 'delete' else 'update' end as `action`,
        coalesce(n.`_hist_user`, o.`_hist_user`) as `user_name`,
        {{ merged_keys | join(', ') }},
        explode(array({{ cells | join(', ') }})) as `cell`
    from {{ in_window }} and `_hist_event` in (2, 3)) as o
    full outer join {{ in_window }} and `_hist_event` in (1, 4)) as n
        on o.`_hist_trans_id` = n.`_hist_trans_id` and o.`_hist_valid_time` <=> n.`_hist_valid_time`
        and {{ lakehistory._join_on('o', 'n', keys) }}
)
where `action` <> 'update' or not (`cell`.`old_value` <=> `cell`.`new_value`))
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}


{#- The key of an events model: the key of the history table it is built from. -#}
{% macro _events_keys(events) %}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'model' and (node.alias or node.name) == events.identifier -%}
      {%- for parent in node.depends_on.nodes -%}
        {%- set p = graph.nodes.get(parent) -%}
        {%- if p and (lakehistory._is_history_node(p)
            or (p.resource_type == 'snapshot' and (p.config.meta or {}).get('lakehistory', {}).get('extract'))) -%}
          {{ return(lakehistory._as_list(p.config.get('unique_key'))) }}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error(events ~ " is not an events model (a model built by lakehistory.event_history from a history table or a snapshot of extracts)") }}
{% endmacro %}
