{#-
  Incremental strategy `fivetran_history`: applies pending change batches exactly as Fivetran's
  history mode specifies (../shared/spec/fivetran-history-mode.md, rules 6-17) and records each
  batch as a transaction with a gap-free id.

      {{ config(materialized='incremental', incremental_strategy='fivetran_history',
                unique_key=['station_id'], deleted_column=none) }}
      select * from {{ lakehistory.landing_batches('crmp_landing', 'meta_station') }}

  The history table keeps both clocks. Each physical row is one Fivetran row (source columns and
  `_fivetran_start/_end/_active/_synced`, valid time) during a range of transactions
  [valid_from, valid_to) (transaction time). A row the rules delete or rewrite is not destroyed:
  it is closed (valid_to = the transaction) and its rewritten form opened (valid_from = the
  transaction). The Fivetran table is the rows whose valid_to is open; every past state is a
  filter. A batch that changes nothing (a re-delivery) opens and closes nothing.

  The work is done by lakehistory.history.apply (Python, in dbt's Spark session): pending batches
  go in groups, each one query and one Delta commit that carries its transactions, so a run
  stopped at any moment and run again applies every batch exactly once.
-#}
{% macro get_incremental_fivetran_history_sql(arg_dict) %}
  {{ return(adapter.dispatch('get_incremental_fivetran_history_sql', 'lakehistory')(arg_dict)) }}
{% endmacro %}

{% macro default__get_incremental_fivetran_history_sql(arg_dict) %}
  {%- set keys = lakehistory._as_list(arg_dict['unique_key']) -%}
  {%- if not keys -%}
    {{ exceptions.raise_compiler_error("fivetran_history: set unique_key to the source key column(s) in " ~ model.name ~ "'s config.") }}
  {%- endif -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- set outcome = adapter.call_python('lakehistory.history.apply:apply_pending', {
      'target': arg_dict['target_relation'] | string,
      'staged': arg_dict['temp_relation'] | string,
      'transactions': transactions | string,
      'keys': keys,
      'deleted_column': config.get('deleted_column'),
      'versioning': {
          'version_type': lakehistory.version_type(),
          'open_end': lakehistory.open_end(),
          'append_only': lakehistory.append_only(),
      },
      'uuid_sql': lakehistory.naksha_uuid('`txn_id`', '`started_at`', 0),
      'exists': arg_dict['existing_relation'] is not none,
      'history_tables': lakehistory._history_relations(),
      'invocation_id': invocation_id,
      'max_batches_per_commit': config.get('max_batches_per_commit'),
      'writer_lock': lakehistory.writer_lock_relation() | string,
      'writer_wait_seconds': var('lakehistory_writer_wait_seconds', 600),
  }) -%}
  select {{ outcome['batches'] | int }} as batches_applied, {{ outcome['groups'] | int }} as groups_committed
{% endmacro %}


{#- Every history table of the project (as relation names), for the ledger's recovery. -#}
{% macro _history_relations() %}
  {%- set relations = [] -%}
  {%- for node in lakehistory.history_nodes() -%}
    {%- do relations.append(api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) | string) -%}
  {%- endfor -%}
  {{ return(relations) }}
{% endmacro %}
