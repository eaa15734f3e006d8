{#-
  The snapshot clock. A snapshot with `meta.lakehistory.extract` captures one daily extract per run
  (lakehistory.landing_extract, which stages it as the table `<snapshot>__lh_extract`); the rows it
  closes or marks deleted take the extract's time, not the wall clock. New versions take it through
  `updated_at: extracted_at`. Every other snapshot keeps dbt's clock.
-#}
{% macro sparksession__snapshot_get_time() %}
  {%- set meta = ((config.get('meta') or {}).get('lakehistory') or {}) if config is defined else {} -%}
  {%- if meta.get('extract') -%}
    (select max(`extracted_at`) from {{ this.schema }}.{{ this.identifier }}__lh_extract)
  {%- else -%}
    {{ current_timestamp() }}
  {%- endif -%}
{% endmacro %}


{#-
  dbt-spark's get_columns_in_relation macro returns the raw rows of `describe extended` (col_name,
  data_type, comment, and the table's metadata rows), which have no `name`. dbt's snapshots use it
  for `hard_deletes: new_record`: every deletion record then carried NULL in every column, its key
  included. The adapter's own method returns the table's columns.
-#}
{% macro sparksession__get_columns_in_relation(relation) -%}
  {{ return(adapter.get_columns_in_relation(relation)) }}
{%- endmacro %}
