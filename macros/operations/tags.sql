{#-
  Tags, as run-operations: a name for a transaction, database-wide (seed 002's tagging). A tag
  names every table as of one transaction: read it back by name with `lakehistory.tagged` (see
  time_travel/tags.sql), and cleanup and retention keep every version it needs.

      dbt run-operation lakehistory.tag --args '{name: paper-2024}'
      dbt run-operation lakehistory.tag --args '{name: before-fix, txn: 41, note: "as published"}'
      dbt run-operation lakehistory.drop_tag --args '{name: before-fix}'

  tag:      names transaction `txn` (default: the last one visible now, the consistent cut every
            reader sees). Refused for a transaction not visible yet (a sync some table has not
            recorded), one after which a cleanup ran (its versions may be gone), and a name that
            names another transaction already. Naming the same transaction again does nothing.
  drop_tag: drops a tag; cleanup may then remove the versions only it kept.
  The tags are rows of `lakehistory_transactions_tags`, beside the transactions table.
-#}
{% macro tag(name, txn=none, note=none, author=none) %}
  {{ return(adapter.dispatch('tag', 'lakehistory')(name, txn, note, author)) }}
{% endmacro %}

{% macro default__tag(name, txn=none, note=none, author=none) %}
  {%- do lakehistory.ensure_transactions_table() -%}
  {%- set visible = run_query("select " ~ lakehistory.visible_txn_sql()).rows[0][0] | int -%}
  {%- set who = author if author is not none else run_query("select current_user()").rows[0][0] -%}
  {%- set outcome = lakehistory._engine('tag', {'name': name | string, 'txn_id': (txn if txn is not none else visible) | int,
      'visible_txn_id': visible, 'author': who, 'note': note}) -%}
  {{ log("tag " ~ outcome['tag'] ~ ": transaction " ~ outcome['txn_id'] ~ (" (already)" if outcome['already'] else ""), info=true) }}
  {{ return(outcome['txn_id']) }}
{% endmacro %}

{% macro drop_tag(name) %}
  {{ return(adapter.dispatch('drop_tag', 'lakehistory')(name)) }}
{% endmacro %}

{% macro default__drop_tag(name) %}
  {%- set dropped = lakehistory._engine('drop_tag', {'name': name | string}) -%}
  {{ log("tag " ~ name ~ (": dropped" if dropped else ": there is no such tag; nothing to do"), info=true) }}
  {{ return(dropped) }}
{% endmacro %}


{#- Where the tags are: a table beside the transactions table. -#}
{% macro tags_relation() %}
  {{ return(adapter.dispatch('tags_relation', 'lakehistory')()) }}
{% endmacro %}

{% macro default__tags_relation() %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return(transactions.incorporate(path={'identifier': transactions.identifier ~ '_tags'})) }}
{% endmacro %}
