{#-
  record_capture(source_table)

  Post-hook of a snapshot of daily extracts (see landing_extract): records the capture of the
  extract as a transaction (operation 'snapshot', batch_id = the extract's day, author = its
  extracted_by), with the rows the snapshot opened (new versions and deletion records) and closed.
  Capturing the same extract again records nothing.
-#}
{% macro record_capture(source_table) %}
  {{ return(adapter.dispatch('record_capture', 'lakehistory')(source_table)) }}
{% endmacro %}

{% macro default__record_capture(source_table) %}
  {%- if not execute -%}
    {{ return('') }}
  {%- endif -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- set staged = lakehistory.staged_extract(this) -%}
  {%- set clock = '(select max(extracted_at) from ' ~ staged ~ ')' -%}
  {%- set day = "date_format(" ~ clock ~ ", 'yyyy-MM-dd')" -%}
  {%- set record -%}
  insert into {{ transactions }} ({{ lakehistory.transaction_columns() }})
  select
      system.session.lakehistory_txn_id,
      {{ lakehistory.naksha_uuid('system.session.lakehistory_txn_id', 'system.session.lakehistory_started_at', 0) }},
      'snapshot',
      {{ lakehistory._text(source_table) }},
      {{ lakehistory._text(this) }},
      {{ day }},
      null,
      e.author,
      'dbt snapshot',
      null,
      system.session.lakehistory_started_at,
      current_timestamp(),
      e.rows_in,
      s.opened,
      s.closed,
      0,
      0,
      system.session.lakehistory_delta_version
  from (select max(extracted_by) as author, count(*) as rows_in from {{ staged }}) as e
  cross join (
      select
          count_if(dbt_valid_from = {{ clock }}) as opened,
          count_if(dbt_valid_to = {{ clock }}) as closed
      from {{ this }}
  ) as s
  where {{ clock }} is not null
      and not exists (
          select 1 from {{ transactions }} as t
          where t.operation = 'snapshot'
              and t.history_table = {{ lakehistory._text(this) }}
              and t.batch_id = {{ day }}
      )
  {%- endset -%}
  {#- Recorded here, under the writer lock, not by the hook's own statement: see run_transaction. -#}
  {%- do lakehistory.run_transaction(transactions, [], record, this) -%}
  {{ return('') }}
{% endmacro %}
