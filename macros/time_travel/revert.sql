{#-
  Revert and undo, as run-operations: history tables back to an earlier state, as new
  transactions (operation = 'revert'). Nothing is removed: the revert closes the current rows the
  earlier state lacks and opens copies of the rows it had, so every state before the revert stays
  readable with `as_of`, and the event history, feature states and `_hx` tables record the revert
  as a change like any other on their next build.

      dbt run-operation lakehistory.revert --args '{models: [meta_station_history, meta_network_history], to_version: 12}'
      dbt run-operation lakehistory.undo --args '{model: meta_station_history, txn_id: 15}'

  revert: each table as of transaction `to_version` (one transaction per table that changes).
  undo:   the keys transaction `txn_id` changed, as they were before it; refused, naming the later
          transactions, when one of them changed such a key since.
  The undone batch stays applied (its id is on record): land a corrected batch under a new id.
-#}
{% macro revert(models, to_version, author=none) %}
  {{ return(adapter.dispatch('revert', 'lakehistory')(models, to_version, author)) }}
{% endmacro %}

{% macro default__revert(models, to_version, author=none) %}
  {%- set done = [] -%}
  {%- for model in lakehistory._as_list(models) -%}
    {%- set outcome = lakehistory._revert_call(model, {'to_txn': to_version | int, 'author': author}) -%}
    {%- do done.append(outcome['transaction']) -%}
    {%- if outcome['transaction'] is none -%}
      {{ log("revert: " ~ model ~ " is as it was after transaction " ~ to_version ~ "; nothing to do", info=true) }}
    {%- else -%}
      {{ log("revert: " ~ model ~ " as of transaction " ~ to_version ~ " (transaction " ~ outcome['transaction'] ~ ": "
          ~ outcome['versions_closed'] ~ " version(s) closed, " ~ outcome['versions_opened'] ~ " reopened)", info=true) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(done) }}
{% endmacro %}

{% macro undo(model, txn_id, author=none) %}
  {{ return(adapter.dispatch('undo', 'lakehistory')(model, txn_id, author)) }}
{% endmacro %}

{% macro default__undo(model, txn_id, author=none) %}
  {%- set outcome = lakehistory._revert_call(model, {'undo_txn': txn_id | int, 'author': author}) -%}
  {%- if outcome['transaction'] is none -%}
    {{ log("undo: transaction " ~ txn_id ~ " left " ~ model ~ " as it was; nothing to do", info=true) }}
  {%- else -%}
    {{ log("undo: transaction " ~ txn_id ~ " of " ~ model ~ " undone (transaction " ~ outcome['transaction'] ~ ": "
        ~ outcome['versions_closed'] ~ " version(s) closed, " ~ outcome['versions_opened'] ~ " reopened)", info=true) }}
  {%- endif -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}

{% macro _revert_call(model, what) %}
  {%- set node = lakehistory.history_nodes() | selectattr('name', 'equalto', model) | first -%}
  {%- if node is not defined or node is none -%}
    {{ exceptions.raise_compiler_error("revert: " ~ model ~ " is not a history table of this project (incremental_strategy='fivetran_history')") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) -%}
  {%- set arguments = {
      'target': target | string,
      'transactions': lakehistory.ensure_transactions_table() | string,
      'keys': lakehistory._as_list(node.config.get('unique_key')),
      'versioning': {
          'version_type': lakehistory.version_type(),
          'open_end': lakehistory.open_end(),
          'append_only': lakehistory.append_only(),
      },
      'uuid_sql': lakehistory.naksha_uuid('`txn_id`', '`started_at`', 0),
      'writer_lock': lakehistory.writer_lock_relation() | string,
      'history_tables': lakehistory._history_relations(),
      'invocation_id': invocation_id,
      'writer_wait_seconds': var('lakehistory_writer_wait_seconds', 600),
  } -%}
  {%- do arguments.update(what) -%}
  {{ return(adapter.call_python('lakehistory.history.revert:revert', arguments)) }}
{% endmacro %}
