{#- Seeds travel as data through a DataFrame (see SparkSessionAdapter.load_seed_rows):
    empty cells are NULL and quotes are ordinary characters. -#}
{% macro sparksession__load_csv_rows(model, agate_table) %}
  {%- set column_types = model['config'].get('column_types', {}) -%}
  {%- set loaded = adapter.load_seed_rows(this, agate_table, column_types) -%}
  {{ return('-- ' ~ loaded ~ ' rows appended to ' ~ this ~ ' through a DataFrame') }}
{% endmacro %}


{#- A seed loaded again: its Delta table is replaced in place (CREATE OR REPLACE, one commit that
    keeps the table's history), not dropped and created anew, so a reader never finds it missing.
    Dropping leaves the table's folder to the store: an S3-compatible store that keeps emptied
    folders (SeaweedFS does) then refuses the new table its location. -#}
{% macro sparksession__reset_csv_table(model, full_refresh, old_relation, agate_table) %}
  {%- if old_relation is none or not old_relation.is_delta or config.get('file_format') not in (none, 'delta') -%}
    {{ return(spark__reset_csv_table(model, full_refresh, old_relation, agate_table)) }}
  {%- endif -%}
  {%- set column_override = model['config'].get('column_types', {}) -%}
  {%- set quote_seed_column = model['config'].get('quote_columns', None) -%}
  {%- set sql -%}
    create or replace table {{ this.render() }} (
        {%- for col_name in agate_table.column_names -%}
            {%- set type = column_override.get(col_name, adapter.convert_type(agate_table, loop.index0)) -%}
            {{ adapter.quote_seed_column(col_name | string, quote_seed_column) }} {{ type }} {%- if not loop.last -%}, {%- endif -%}
        {%- endfor -%}
    )
    {{ file_format_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
  {%- endset -%}
  {%- call statement('_') -%}{{ sql }}{%- endcall -%}
  {{ return(sql) }}
{% endmacro %}
