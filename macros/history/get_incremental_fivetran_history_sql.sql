{#-
  Incremental strategy `fivetran_history`: applies pending change batches exactly as Fivetran's
  history mode specifies (../shared/spec/fivetran-history-mode.md, rules 6-17), one batch after
  another in batch order, each batch as ONE Delta MERGE into ONE table, each recorded as a
  transaction with a gap-free id.

      {{ config(materialized='incremental', incremental_strategy='fivetran_history',
                unique_key=['station_id'], deleted_column=none) }}
      select * from {{ lakehistory.landing_batches('crmp_landing', 'meta_station') }}

  The history table keeps both clocks. Each physical row is one Fivetran row (source columns and
  `_fivetran_start/_end/_active/_synced`, valid time) during a range of transactions
  [valid_from, valid_to) (transaction time). A row the rules delete or rewrite is not destroyed:
  it is closed (valid_to = this transaction) and its rewritten form opened (valid_from = this
  transaction). The Fivetran table is the rows whose valid_to is open; every past state is a
  filter. A batch that changes nothing (a re-delivery) opens and closes nothing.

  The merge only reads the live rows of the batch's keys: its cost follows the batch.
-#}
{% macro get_incremental_fivetran_history_sql(arg_dict) %}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set staged = arg_dict['temp_relation'] -%}
  {%- set keys = lakehistory._as_list(arg_dict['unique_key']) -%}
  {%- if not keys -%}
    {{ exceptions.raise_compiler_error("fivetran_history: set unique_key to the source key column(s) in " ~ model.name ~ "'s config.") }}
  {%- endif -%}
  {%- set columns = lakehistory._history_source_columns(staged) -%}
  {%- set names = columns | map(attribute='name') | list -%}
  {%- for key in keys -%}
    {%- if key not in names -%}
      {{ exceptions.raise_compiler_error("fivetran_history: key column " ~ key ~ " is not a column of " ~ model.name ~ "'s rows.") }}
    {%- endif -%}
  {%- endfor -%}
  {%- set deleted_column = config.get('deleted_column') -%}
  {%- if deleted_column and deleted_column not in names -%}
    {{ exceptions.raise_compiler_error("fivetran_history: deleted_column " ~ deleted_column ~ " is not a column of " ~ model.name ~ ".") }}
  {%- endif -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}

  {%- set add_columns = [] -%}
  {%- if arg_dict['existing_relation'] is none -%}
    {%- do lakehistory._create_history_table(target, columns, keys) -%}
  {%- else -%}
    {%- set stored = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
    {%- for name in stored -%}
      {%- if name not in names and not name.startswith('_fivetran_') and name not in ('valid_from', 'valid_to', 'removal') -%}
        {{ exceptions.raise_compiler_error(
            "fivetran_history: " ~ model.name ~ " has column " ~ name ~ ", which the source does not declare and no"
            ~ " landed batch adds (spec rule 17). Declare it in the source's columns with its data_type.") }}
      {%- endif -%}
    {%- endfor -%}
    {#- A column the source declares or a batch adds, and the table lacks, is added (rule 17). -#}
    {%- for column in columns if column.name not in stored -%}
      {%- do add_columns.append(column) -%}
    {%- endfor -%}
  {%- endif -%}

  {%- set ordinals = run_query(
      "select _lh_ordinal from " ~ staged ~ " where _lh_kind = 'batch' order by _lh_ordinal") -%}
  {%- for row in ordinals.rows -%}
    {%- do lakehistory._apply_history_batch(
        target, staged, transactions, keys, columns, deleted_column, row[0] | int,
        add_columns if loop.first else []) -%}
  {%- endfor -%}

  select count(*) as transactions_applied from {{ transactions }}
  where history_table = '{{ target | replace("'", "") }}'
{% endmacro %}


{#- The columns a history table stores of the staged rows (source columns and the four
    Fivetran system columns), with their types. -#}
{% macro _history_source_columns(staged) %}
  {%- set columns = [] -%}
  {%- for column in adapter.get_columns_in_relation(staged) -%}
    {%- if not column.name.startswith('_lh_') and column.name != '_fivetran_earliest' -%}
      {%- do columns.append(column) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set names = columns | map(attribute='name') | list -%}
  {%- for system in ['_fivetran_start', '_fivetran_end', '_fivetran_active', '_fivetran_synced'] -%}
    {%- if system not in names -%}
      {{ exceptions.raise_compiler_error("fivetran_history: the model's rows lack " ~ system ~ "; select from lakehistory.landing_batches(...).") }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(columns | rejectattr('name', 'in', ['_fivetran_start', '_fivetran_end', '_fivetran_active', '_fivetran_synced']) | list) }}
{% endmacro %}


{% macro _create_history_table(target, columns, keys) %}
  {%- call statement('lakehistory_create_history_table') -%}
    create table {{ target }} (
        {%- for column in columns %}
        {{ adapter.quote(column.name) }} {{ column.data_type }},
        {%- endfor %}
        `_fivetran_start` timestamp not null,
        `_fivetran_end` timestamp not null,
        `_fivetran_active` boolean not null,
        `_fivetran_synced` timestamp,
        {%- set version_type = lakehistory.version_sql_type() %}
        `valid_from` {{ version_type }} not null comment 'First transaction this row is part of (inclusive)',
        {%- if lakehistory.append_only() %}
        `removal` boolean not null comment 'True on a row that records that this (key, _fivetran_start) row left the table at valid_from'
        {%- else %}
        `valid_to` {{ version_type }}{% if lakehistory.open_end() == 'max' %} not null{% endif %} comment 'Transaction that closed this row (exclusive); open rows hold {{ lakehistory.open_version() | replace("'", "") }}'
        {%- endif %}
    )
    using delta
    {#- Clustered by key (the merge reads a batch's keys) and by transaction time (as-of reads skip
        the files of versions closed before the version asked for). -#}
    {%- set clustering = keys[:3] + (['valid_from'] if lakehistory.append_only() else ['valid_to']) %}
    cluster by ({{ lakehistory._columns(clustering, none) }})
    tblproperties ('delta.enableDeletionVectors' = 'true')
  {%- endcall -%}
{% endmacro %}


{% macro _as_list(value) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {{ return([value] if value is string else value | list) }}
{% endmacro %}
