{#-
  Model contracts with constraints, on Delta.

  dbt-spark creates a contracted table with CREATE TABLE AS SELECT and then adds its constraints
  with ALTER TABLE. Delta refuses to make an existing column NOT NULL, so a contract with a
  not_null constraint does not build, and a CHECK added afterwards finds the new rows already in
  place. Here the constraints are part of the statement that creates the table, as the table
  properties Delta keeps its CHECK constraints in (`delta.constraints.<name>`; a not_null is the
  CHECK `<column> is not null`: adapter.delta_checks). It is one Delta commit: a row that breaks
  a constraint fails the whole statement, and the table keeps the rows it had.
-#}
{% macro sparksession__create_table_as(temporary, relation, compiled_code, language='sql') -%}
  {%- set contract = config.get('contract') -%}
  {%- set file_format = config.get('file_format', validator=validation.any[basestring]) or 'delta' -%}
  {%- if language == 'sql' and not temporary and contract.enforced and file_format == 'delta' -%}
    {%- set properties = dict(config.get('tblproperties') or {}) -%}
    {%- for check in adapter.delta_checks(model.columns, model.constraints) -%}
      {%- do properties.update({'delta.constraints.' ~ check[0]: check[1]}) -%}
    {%- endfor -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
    create or replace table {{ relation }}
    using delta
    {{ options_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
    {%- if properties %}
    tblproperties (
      {%- for name, value in properties.items() %}
      {{ sparksession__string_literal(name) }} = {{ sparksession__string_literal(value) }}{% if not loop.last %},{% endif %}
      {%- endfor %}
    )
    {%- endif %}
    as
    {{ get_select_subquery(compiled_code) }}
  {%- else -%}
    {{ spark__create_table_as(temporary, relation, compiled_code, language) }}
  {%- endif -%}
{%- endmacro %}


{#- The constraints are in the statement that created the table (above): nothing to add after it. -#}
{% macro sparksession__persist_constraints(relation, model) %}
{% endmacro %}


{% macro sparksession__string_literal(text) -%}
  '{{ text | string | replace('\\', '\\\\') | replace("'", "\\'") }}'
{%- endmacro %}
