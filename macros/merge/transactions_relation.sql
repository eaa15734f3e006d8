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
  {%- do adapter.call_python('lakehistory.history.transactions:ensure_transactions_table', {'relation': relation | string}) -%}
  {{ return(relation) }}
{% endmacro %}


{#- The lock a writer of the transactions table holds (lakehistory.history.writer): a one-row
    table beside it. -#}
{% macro writer_lock_relation() %}
  {{ return(adapter.dispatch('writer_lock_relation', 'lakehistory')()) }}
{% endmacro %}

{% macro default__writer_lock_relation() %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return(transactions.incorporate(path={'identifier': transactions.identifier ~ '_writer'})) }}
{% endmacro %}


{#- The next transaction (of a snapshot capture or a cleanup): its id (max + 1, under the writer
    lock: one writer at a time per lakehouse) and its time (now, but always after the previous transaction's, so
    started_at orders transactions too). -#}
{% macro next_transaction(transactions) %}
  {{ return(adapter.dispatch('next_transaction', 'lakehistory')(transactions)) }}
{% endmacro %}

{% macro default__next_transaction(transactions) %}
  {#- A stopped run may have left a history table's commit unrecorded: record it first. -#}
  {%- do adapter.call_python('lakehistory.history.apply:recover_transactions', {
      'transactions': transactions | string,
      'history_tables': lakehistory._history_relations(),
      'uuid_sql': lakehistory.naksha_uuid('`txn_id`', '`started_at`', 0),
      'invocation_id': invocation_id,
      'writer_lock': lakehistory.writer_lock_relation() | string,
      'writer_wait_seconds': var('lakehistory_writer_wait_seconds', 600),
  }) -%}
  {%- set now = modules.datetime.datetime.utcnow().isoformat(sep=' ', timespec='milliseconds') -%}
  {%- set next = run_query(
      "select coalesce(max(txn_id), 0) + 1, date_format(greatest(timestamp'" ~ now ~ "',"
      ~ " max(started_at) + interval 1 millisecond), 'yyyy-MM-dd HH:mm:ss.SSS') from " ~ transactions).rows[0] -%}
  {{ return([next[0] | int, next[1]]) }}
{% endmacro %}


{#- The columns of the transactions table, in order: for `insert into ... (columns) select ...`. -#}
{% macro transaction_columns() %}
  {{ return(adapter.dispatch('transaction_columns', 'lakehistory')()) }}
{% endmacro %}

{% macro default__transaction_columns() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {{ return(adapter.call_python('lakehistory.history.transactions:column_list', {})) }}
{% endmacro %}
