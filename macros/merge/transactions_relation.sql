{#-
  The project's one transactions table: every applied batch (and every cleanup) is a transaction
  with a gap-free id and a Naksha uuid (object type 0).
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
  {%- set relation = lakehistory.transactions_relation() -%}
  {%- call statement('lakehistory_transactions_table') -%}
    create table if not exists {{ relation }} (
        txn_id bigint not null comment 'Transaction id: 1, 2, 3, ... with no gaps, in commit order',
        txn_uuid string not null comment 'Naksha uuid of the transaction: txn_id, start date, object type 0, database id',
        operation string not null comment 'batch (a landed batch applied) or cleanup (old versions removed)',
        source_table string comment 'The landed table the batch belongs to',
        history_table string not null comment 'The history table the transaction changed',
        batch_id string comment 'The batch (its folder name in the landing root)',
        batch_sequence bigint comment 'The batch order within its table',
        author string comment 'Who made the change (the batch manifest)',
        app_id string comment 'The application that made the change (the batch manifest)',
        commit_message string comment 'Optional message of the batch manifest',
        started_at timestamp not null comment 'When applying the batch started',
        committed_at timestamp not null comment 'When the batch was committed',
        rows_in bigint not null comment 'Rows in the batch files (replace, update, delete, earliest)',
        versions_opened bigint not null comment 'History rows opened (valid_from = txn_id)',
        versions_closed bigint not null comment 'History rows closed (valid_to = txn_id)',
        rows_overlap_deleted bigint not null comment 'Rows removed from the Fivetran view by the overlap delete (rule 7)',
        rows_purged bigint not null comment 'Closed versions physically removed (cleanup)',
        delta_version bigint not null comment 'The Delta version of the history table this transaction committed'
    ) using delta
  {%- endcall -%}
  {#- A table made by an earlier layout (before operation and rows_purged) cannot take new rows. -#}
  {%- set stored = adapter.get_columns_in_relation(relation) | map(attribute='name') | list -%}
  {%- if 'operation' not in stored or 'rows_purged' not in stored -%}
    {{ exceptions.raise_compiler_error(
        relation ~ " was made by an earlier version of lakehistory (it lacks operation and rows_purged)."
        ~ " Rebuild from the landed batches: drop it and the history tables (for the demo: make clean), then run dbt build.") }}
  {%- endif -%}
  {{ return(relation) }}
{% endmacro %}


{#- The next transaction (of a snapshot capture or a cleanup): its id (max + 1: one writer at a
    time per lakehouse) and its time (now, but always after the previous transaction's, so
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
  {{ return('txn_id, txn_uuid, operation, source_table, history_table, batch_id, batch_sequence, author, app_id,'
      ~ ' commit_message, started_at, committed_at, rows_in, versions_opened, versions_closed,'
      ~ ' rows_overlap_deleted, rows_purged, delta_version') }}
{% endmacro %}
