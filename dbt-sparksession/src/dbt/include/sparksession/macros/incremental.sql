{#-
  The incremental materialization of the `sparksession` adapter: dbt-spark 1.11's own, with one
  addition. A strategy dbt-spark does not know is a custom strategy: a macro
  `get_incremental_<name>_sql(arg_dict)` in the project or an installed package.

  A custom strategy owns its table's whole lifecycle: it is called on every build, the first
  one included, with dbt-core's arguments (target_relation, temp_relation, unique_key,
  dest_columns, incremental_predicates) plus
    existing_relation  the target as it exists now; none on a first build (or when the target
                       was a view, which is dropped first);
    full_refresh       whether this build is a full refresh (`--full-refresh`, unless the model
                       sets `full_refresh`): the target is not dropped for it, the strategy decides
                       (drop and rebuild, refuse, or go on incrementally);
    language           the model's language, 'sql' or 'python'.
  `temp_relation` holds the model's rows (a temp view for SQL, a table for Python models).
  The macro may run statements itself and returns the last SQL to run as `main`.

  (dbt-spark's materialization cannot simply be called from here for built-in strategies:
  dbt only lets a materialization submit Python models directly.)
-#}
{% materialization incremental, adapter='sparksession', supported_languages=['sql', 'python'] -%}
  {%- set raw_file_format = config.get('file_format', default='parquet') -%}
  {%- set raw_strategy = config.get('incremental_strategy') or 'append' -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set file_format = dbt_spark_validate_get_file_format(raw_file_format) -%}

  {%- set is_custom = not adapter.is_builtin_incremental_strategy(raw_strategy) -%}
  {%- if is_custom -%}
    {%- set strategy = raw_strategy -%}
    {%- set strategy_macro = adapter.get_incremental_strategy_macro(context, strategy) -%}
  {%- else -%}
    {%- set strategy = dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) -%}
  {%- endif -%}

  {%- set unique_key = config.get('unique_key', none) -%}
  {%- set partition_by = config.get('partition_by', none) -%}
  {%- set language = model['language'] -%}
  {%- set on_schema_change = incremental_validate_on_schema_change(config.get('on_schema_change'), default='ignore') -%}
  {%- set incremental_predicates = config.get('predicates', none) or config.get('incremental_predicates', none) -%}
  {%- set target_relation = this -%}
  {%- set existing_relation = load_relation(this) -%}
  {%- set tmp_relation = this.incorporate(path = {"identifier": this.identifier ~ '__dbt_tmp'}) -%}
  {%- if language == 'sql' -%}
    {%- set tmp_relation = tmp_relation.include(database=false, schema=false) -%}
  {%- endif -%}

  {%- if strategy in ['insert_overwrite', 'microbatch'] and partition_by -%}
    {%- call statement() -%}
      set spark.sql.sources.partitionOverwriteMode = DYNAMIC
    {%- endcall -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks) }}

  {%- if is_custom and existing_relation is not none and existing_relation.is_view -%}
    {%- do adapter.drop_relation(existing_relation) -%}
    {%- set existing_relation = none -%}
  {%- endif -%}

  {%- if is_custom -%}
    {%- call statement('create_tmp_relation', language=language) -%}
      {{ create_table_as(True, tmp_relation, compiled_code, language) }}
    {%- endcall -%}
    {%- set arg_dict = {
        'target_relation': target_relation,
        'temp_relation': tmp_relation,
        'existing_relation': existing_relation,
        'full_refresh': should_full_refresh(),
        'unique_key': unique_key,
        'dest_columns': none,
        'incremental_predicates': incremental_predicates,
        'language': language,
    } -%}
    {%- call statement('main') -%}
      {{ strategy_macro(arg_dict) }}
    {%- endcall -%}
  {%- elif existing_relation is none -%}
    {%- call statement('main', language=language) -%}
      {{ create_table_as(False, target_relation, compiled_code, language) }}
    {%- endcall -%}
    {% do persist_constraints(target_relation, model) %}
  {%- elif existing_relation.is_view or should_full_refresh() -%}
    {% set is_delta = (file_format == 'delta' and existing_relation.is_delta) %}
    {#- A Python model's Delta write replaces the table in one commit (dbt-spark's py_write_table:
        overwrite, with its schema): dropping first would leave no table while the model runs,
        and nothing to the model that could tell a full refresh from a first build. -#}
    {% set replaced_in_place = language == 'python' and config.get('file_format', 'delta') == 'delta' %}
    {% if not is_delta and not replaced_in_place %}
      {% do adapter.drop_relation(existing_relation) %}
    {% endif %}
    {%- call statement('main', language=language) -%}
      {{ create_table_as(False, target_relation, compiled_code, language) }}
    {%- endcall -%}
    {% do persist_constraints(target_relation, model) %}
  {%- else -%}
    {%- call statement('create_tmp_relation', language=language) -%}
      {{ create_table_as(True, tmp_relation, compiled_code, language) }}
    {%- endcall -%}
    {%- do process_schema_changes(on_schema_change, tmp_relation, existing_relation) -%}
    {%- call statement('main') -%}
      {{ dbt_spark_get_incremental_sql(strategy, tmp_relation, target_relation, existing_relation, unique_key, incremental_predicates) }}
    {%- endcall -%}
  {%- endif -%}

  {#- A Python model's rows sit in a real table; a SQL model's in a session temp view. -#}
  {%- if language == 'python' and (is_custom or existing_relation is not none) -%}
    {% call statement('drop_relation') -%}
      drop table if exists {{ tmp_relation }}
    {%- endcall %}
  {%- endif -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}

  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
