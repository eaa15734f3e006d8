{#-
  The project's one transactions table: every applied batch, snapshot capture and cleanup is a
  transaction with a gap-free id and a Naksha uuid (object type 0).
  Name it with the var `lakehistory_transactions` (default `lakehistory_transactions`, in the
  target schema).
-#}
{% macro transactions_relation() %}
  {{ return(adapter.dispatch('transactions_relation', 'lakehistory')()) }}
{% endmacro %}

{% macro default__transactions_relation() %}
  {{ return(api.Relation.create(
      schema=target.schema,
      identifier=var('lakehistory_transactions', 'lakehistory_transactions'),
      type='table')) }}
{% endmacro %}


{% macro ensure_transactions_table() %}
  {{ return(adapter.dispatch('ensure_transactions_table', 'lakehistory')()) }}
{% endmacro %}

{% macro default__ensure_transactions_table() %}
  {#- The layout is declared once, in Python (lakehistory.history.transactions), which also
      refuses a table made by an earlier layout. -#}
  {%- set relation = lakehistory.transactions_relation() -%}
  {%- do lakehistory._engine('ensure_transactions_table') -%}
  {{ return(relation) }}
{% endmacro %}


{#- The syncs table beside the transactions table: the id reserved for each sync, and the tables
    it holds (lakehistory.history.syncs). -#}
{% macro syncs_relation() %}
  {{ return(adapter.dispatch('syncs_relation', 'lakehistory')()) }}
{% endmacro %}

{% macro default__syncs_relation() %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return(transactions.incorporate(path={'identifier': transactions.identifier ~ '_syncs'})) }}
{% endmacro %}


{#- The lock a writer of the transactions table holds (lakehistory.history.lock): a one-row
    table beside it. -#}
{% macro writer_lock_relation() %}
  {{ return(adapter.dispatch('writer_lock_relation', 'lakehistory')()) }}
{% endmacro %}

{% macro default__writer_lock_relation() %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return(transactions.incorporate(path={'identifier': transactions.identifier ~ '_writer'})) }}
{% endmacro %}


{#- A transaction of a snapshot capture or a cleanup: `statements`, then `row` (the query of its
    row of the transactions table, recorded only if no other writer took its id), run as the one writer (lakehistory.history.lock) with
    the next id. They read the transaction from session variables: `system.session.lakehistory_txn_id`
    is the id (the largest so far + 1), `system.session.lakehistory_started_at` its start (now, but
    always after the previous transaction's) and, in `row`, `system.session.lakehistory_delta_version`
    the Delta version of `versioned` after the statements, all in a copy of dbt's Spark session
    (lakehistory.history.session). `capture_of`: the snapshot whose capture this is; when its
    extract belongs to a sync, the transaction is the sync's. Returns the id. -#}
{% macro run_transaction(transactions, statements, row, versioned, capture_of=none) %}
  {{ return(adapter.dispatch('run_transaction', 'lakehistory')(transactions, statements, row, versioned, capture_of)) }}
{% endmacro %}

{% macro default__run_transaction(transactions, statements, row, versioned, capture_of=none) %}
  {#- A stopped run may have left a history table's commit unrecorded: it is recorded first. -#}
  {{ return(lakehistory._engine('run_transaction', {
      'statements': statements,
      'row': row,
      'versioned': versioned | string,
      'capture_of': (capture_of | string) if capture_of is not none else none,
  })) }}
{% endmacro %}


{#- The columns of the transactions table, in order: for `insert into ... (columns) select ...`. -#}
{% macro transaction_columns() %}
  {{ return(adapter.dispatch('transaction_columns', 'lakehistory')()) }}
{% endmacro %}

{% macro default__transaction_columns() %}
  {{ return(lakehistory._columns(lakehistory._names()['transaction_columns'], none)) }}
{% endmacro %}
