{#-
  Revert and undo, as run-operations: history tables back to an earlier state, as one new
  transaction (operation = 'revert') for every table that changes, as a sync's tables share one.
  Nothing is removed: the revert closes the current rows the earlier state lacks and opens copies
  of the rows it had, so every state before the revert stays readable with `as_of`, and the event
  history, feature states and `_hx` tables record the revert as a change like any other on their
  next build.

      dbt run-operation lakehistory.revert --args '{models: [meta_station_history, meta_network_history], to_version: 12}'
      dbt run-operation lakehistory.undo --args '{txn_id: 15}'
      dbt run-operation lakehistory.undo --args '{model: meta_station_history, txn_id: 15}'
      dbt run-operation lakehistory.rewind --args '{model: meta_station_history, to_version: 12, keys: [[101], [102]]}'
      dbt run-operation lakehistory.rewind --args '{model: meta_station_history, to_version: 12, where: "network_id = 4"}'

  revert: the models as of transaction `to_version`.
  rewind: chosen keys of one model as of transaction `to_version` (Naksha: "rewind back to any
          previous state" of a feature): `keys`, a list of keys (each a list of the key's values,
          in the model's unique_key order), or `where`, a predicate over the table's columns. Its
          other keys stay as they are.
  undo:   the keys transaction `txn_id` changed, as they were before it, in every history table it
          changed (a sync's: all its tables), or in `model` alone; refused, naming the later
          transactions, when one of them changed such a key since. A transaction that also
          captured an extract (a sync with daily extracts) is refused, naming the captures: an
          undo cannot take back a capture. `keep_captures: true` undoes its history tables as one
          transaction and leaves the captures as they are (and names them).
  The undone batch stays applied (its id is on record): land a corrected batch under a new id.
  Stopped before every table recorded it (the transaction is then not visible to readers of the
  consistent cut, and its tables take no other transaction), it is completed by running the same
  command again.
-#}
{% macro revert(models, to_version, author=none) %}
  {{ return(adapter.dispatch('revert', 'lakehistory')(models, to_version, author)) }}
{% endmacro %}

{% macro default__revert(models, to_version, author=none) %}
  {%- set tables = [] -%}
  {%- for model in lakehistory._as_list(models) -%}
    {%- do tables.append(lakehistory._revert_table(model)) -%}
  {%- endfor -%}
  {%- set outcome = lakehistory._engine('revert', {
      'tables': tables, 'named': true, 'to_txn': to_version | int, 'author': author}) -%}
  {%- do lakehistory._revert_log('revert to transaction ' ~ to_version, outcome) -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}

{% macro rewind(model, to_version, keys=none, where=none, author=none) %}
  {{ return(adapter.dispatch('rewind', 'lakehistory')(model, to_version, keys, where, author)) }}
{% endmacro %}

{% macro default__rewind(model, to_version, keys=none, where=none, author=none) %}
  {%- if (keys is none) == (where is none) -%}
    {{ exceptions.raise_compiler_error("rewind: give exactly one of keys (a list of keys, each a list of values) or where (a predicate)") }}
  {%- endif -%}
  {%- set table = lakehistory._revert_table(model) -%}
  {%- set chosen = [] -%}
  {%- for key in keys or [] -%}
    {%- set values = key if key is iterable and key is not string else [key] -%}
    {%- if values | length != table['keys'] | length -%}
      {{ exceptions.raise_compiler_error("rewind: key " ~ key ~ " has " ~ (values | length) ~ " value(s); " ~ model
          ~ "'s key is " ~ table['keys'] | join(', ')) }}
    {%- endif -%}
    {%- do chosen.append(values | map('string') | list) -%}
  {%- endfor -%}
  {%- set outcome = lakehistory._engine('revert', {'tables': [table], 'named': true, 'to_txn': to_version | int,
      'keys': chosen if keys is not none else none, 'where': where, 'author': author}) -%}
  {%- do lakehistory._revert_log('rewind to transaction ' ~ to_version, outcome) -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}

{% macro undo(model=none, txn_id=none, author=none, keep_captures=false) %}
  {{ return(adapter.dispatch('undo', 'lakehistory')(model, txn_id, author, keep_captures)) }}
{% endmacro %}

{% macro default__undo(model=none, txn_id=none, author=none, keep_captures=false) %}
  {%- if txn_id is none -%}
    {{ exceptions.raise_compiler_error("undo: txn_id is required: the transaction to undo") }}
  {%- endif -%}
  {%- if model is none -%}
    {%- set tables = [] -%}
    {%- for node in lakehistory.history_nodes() -%}
      {%- do tables.append(lakehistory._revert_table(node.name)) -%}
    {%- endfor -%}
  {%- else -%}
    {%- set tables = [lakehistory._revert_table(model)] -%}
  {%- endif -%}
  {%- set outcome = lakehistory._engine('revert', {
      'tables': tables, 'named': model is not none, 'undo_txn': txn_id | int, 'author': author,
      'keep_captures': keep_captures in (true, 'true', 'True')}) -%}
  {%- do lakehistory._revert_log('undo of transaction ' ~ txn_id, outcome) -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}

{% macro _revert_log(what, outcome) %}
  {%- if outcome['transaction'] is none -%}
    {{ log(what ~ ": the tables already are as asked; nothing to do", info=true) }}
  {%- elif outcome['already_done'] -%}
    {{ log(what ~ ": done already, as transaction " ~ outcome['transaction'], info=true) }}
  {%- else -%}
    {%- for model, counts in outcome['tables'].items() -%}
      {{ log(what ~ ": " ~ model ~ " in transaction " ~ outcome['transaction'] ~ " ("
          ~ counts['versions_closed'] ~ " version(s) closed, " ~ counts['versions_opened'] ~ " reopened)", info=true) }}
    {%- endfor -%}
  {%- endif -%}
  {%- for table in outcome['left_as_they_are'] -%}
    {{ log(what ~ ": " ~ table ~ " is a capture of an extract; left as it is (keep_captures)", info=true) }}
  {%- endfor -%}
{% endmacro %}

{#- A history model as the engine takes it: its name, relation and key. -#}
{% macro _revert_table(model) %}
  {%- set node = lakehistory.history_nodes() | selectattr('name', 'equalto', model) | first -%}
  {%- if node is not defined or node is none -%}
    {{ exceptions.raise_compiler_error("revert: " ~ model ~ " is not a history table of this project (incremental_strategy='fivetran_history')") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) -%}
  {{ return({'model': model, 'target': target | string, 'keys': lakehistory._as_list(node.config.get('unique_key'))}) }}
{% endmacro %}
