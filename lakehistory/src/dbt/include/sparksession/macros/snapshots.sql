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
