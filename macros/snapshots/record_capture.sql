{#-
  record_capture(source_table)

  Post-hook of a snapshot of daily extracts (see landing_extract): records the capture of the
  extract as a transaction (operation 'snapshot', batch_id = the extract's day, author = its
  extracted_by), with the rows the snapshot opened (new versions and deletion records) and closed.
  Capturing the same extract again records nothing.
-#}
{% macro record_capture(source_table) %}
  {%- if not execute -%}
    {{ return('') }}
  {%- endif -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- set staged = lakehistory.staged_extract(this) -%}
  {%- set clock = '(select max(extracted_at) from ' ~ staged ~ ')' -%}
  {%- set now = modules.datetime.datetime.utcnow().isoformat(sep=' ', timespec='milliseconds') -%}
  {%- set next = run_query(
      "select coalesce(max(txn_id), 0) + 1, date_format(greatest(timestamp'" ~ now ~ "',"
      ~ " max(started_at) + interval 1 millisecond), 'yyyy-MM-dd HH:mm:ss.SSS') from " ~ transactions).rows[0] -%}
  {%- set txn_id, started_at = next[0] | int, next[1] -%}
  {%- set delta_version = run_query("describe history " ~ this ~ " limit 1").rows[0][0] | int -%}
  {%- set day = "date_format(" ~ clock ~ ", 'yyyy-MM-dd')" -%}
  insert into {{ transactions }} (
      txn_id, txn_uuid, operation, source_table, history_table, batch_id, batch_sequence, author, app_id,
      commit_message, started_at, committed_at, rows_in, versions_opened, versions_closed,
      rows_overlap_deleted, rows_purged, delta_version
  )
  select
      {{ txn_id }},
      {{ lakehistory.naksha_uuid(txn_id, "timestamp'" ~ started_at ~ "'", 0) }},
      'snapshot',
      '{{ source_table | replace("'", "") }}',
      '{{ this | replace("'", "") }}',
      {{ day }},
      null,
      e.author,
      'dbt snapshot',
      null,
      timestamp'{{ started_at }}',
      current_timestamp(),
      e.rows_in,
      s.opened,
      s.closed,
      0,
      0,
      {{ delta_version }}
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
              and t.history_table = '{{ this | replace("'", "") }}'
              and t.batch_id = {{ day }}
      )
{% endmacro %}
