{#- Seeds travel as data through a DataFrame (see SparkSessionAdapter.load_seed_rows):
    empty cells are NULL and quotes are ordinary characters. -#}
{% macro sparksession__load_csv_rows(model, agate_table) %}
  {%- set column_types = model['config'].get('column_types', {}) -%}
  {%- set loaded = adapter.load_seed_rows(this, agate_table, column_types) -%}
  {{ return('-- ' ~ loaded ~ ' rows appended to ' ~ this ~ ' through a DataFrame') }}
{% endmacro %}
