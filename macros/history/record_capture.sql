{#-
  record_capture(source_table)

  Post-hook of a snapshot of daily extracts (see landing_extract): records the capture of the
  extract as a transaction (operation 'snapshot', batch_id = the extract's day, author = its
  extracted_by), with the rows the snapshot opened (new versions and deletion records) and closed.
  An extract of a sync (a sync file beside it) is captured as part of the sync's transaction: its
  id, start, author and app. Capturing the same extract again records nothing.
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
  {%- set day = "date_format(e.clock, 'yyyy-MM-dd')" -%}
  {%- set row -%}
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
      count_if(s.dbt_valid_from = e.clock),
      count_if(s.dbt_valid_to = e.clock),
      0,
      0,
      system.session.lakehistory_delta_version,
      null,
      null,
      null
  -- the extract read once: its time is the clock of the versions this capture opened and closed
  from (
      select max(extracted_by) as author, count(*) as rows_in, max(extracted_at) as clock from {{ staged }}
  ) as e
  left join {{ this }} as s on s.dbt_valid_from = e.clock or s.dbt_valid_to = e.clock
  where e.clock is not null
      and not exists (
          select 1 from {{ transactions }} as t
          where t.operation = 'snapshot'
              and t.history_table = {{ lakehistory._text(this) }}
              and (t.batch_id = {{ day }} or exists(t.parts, p -> p.batch_id = {{ day }}))
      )
  group by e.author, e.rows_in, e.clock
  {%- endset -%}
  {#- Recorded here, under the writer lock, not by the hook's own statement: see run_transaction. -#}
  {%- do lakehistory.run_transaction(transactions, [], row, this, capture_of=this) -%}
  {{ return('') }}
{% endmacro %}
