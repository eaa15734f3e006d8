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

  The work is done by lakehistory.history.apply (Python, in dbt's Spark session, through lakehistory.door): pending batches
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
  {%- do lakehistory._refuse_full_refresh('a history table', arg_dict['target_relation'],
      arg_dict.get('full_refresh', false) and arg_dict['existing_relation'] is not none) -%}
  {%- set outcome = lakehistory._engine('apply_pending', {
      'target': arg_dict['target_relation'] | string,
      'staged': arg_dict['temp_relation'] | string,
      'keys': keys,
      'deleted_column': config.get('deleted_column'),
      'exists': arg_dict['existing_relation'] is not none,
      'max_batches_per_commit': config.get('max_batches_per_commit'),
  }) -%}
  select {{ outcome['batches'] | int }} as batches_applied, {{ outcome['groups'] | int }} as groups_committed
{% endmacro %}
