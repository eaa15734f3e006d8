{#-
  How history tables write transaction time, set once for the whole project (dbt_project.yml vars);
  choose before the first build, since existing tables keep the form they were built with.

    lakehistory_version_type  'integer' (default): valid_from/valid_to hold transaction ids.
                              'timestamp': they hold each transaction's time (its started_at,
                              strictly increasing across transactions).
    lakehistory_open_end      'max' (default): a current row's valid_to is the largest value of
                              the type (keeps as-of filters plain range predicates).
                              'null': a current row's valid_to is NULL.
    lakehistory_append_only   false (default), or true: rows are never updated. A history table
                              has valid_from only; a version that leaves the table is recorded by
                              an appended row with `removal` = true. As of v, a (key,
                              _fivetran_start) row is its latest version with valid_from <= v,
                              unless that is a removal.
-#}
{% macro version_type() %}
  {%- set value = var('lakehistory_version_type', 'integer') -%}
  {%- if value not in ('integer', 'timestamp') -%}
    {{ exceptions.raise_compiler_error("var lakehistory_version_type must be 'integer' or 'timestamp', not " ~ value) }}
  {%- endif -%}
  {{- return(value) -}}
{% endmacro %}


{% macro open_end() %}
  {%- set value = var('lakehistory_open_end', 'max') -%}
  {%- if value not in ('max', 'null') -%}
    {{ exceptions.raise_compiler_error("var lakehistory_open_end must be 'max' or 'null', not " ~ value) }}
  {%- endif -%}
  {{- return(value) -}}
{% endmacro %}


{% macro append_only() %}
  {{- return(var('lakehistory_append_only', false) in (true, 'true', 'True')) -}}
{% endmacro %}


{#- The SQL type of valid_from / valid_to. -#}
{% macro version_sql_type() %}
  {{- return('bigint' if lakehistory.version_type() == 'integer' else 'timestamp') -}}
{% endmacro %}


{#- The valid_to of a row that is still current (open in transaction time), as SQL. -#}
{% macro open_version() %}
  {%- if lakehistory.open_end() == 'null' -%}
    {{- return('null') -}}
  {%- elif lakehistory.version_type() == 'integer' -%}
    {{- return(9223372036854775807) -}}
  {%- else -%}
    {{- return("timestamp'9999-12-31 23:59:59.999999'") -}}
  {%- endif -%}
{% endmacro %}


{#- A predicate: the row (alias or none) is current in transaction time. -#}
{% macro is_current(alias=none) %}
  {%- set p = (alias ~ '.') if alias else '' -%}
  {%- if lakehistory.append_only() -%}
    {{ exceptions.raise_compiler_error("append-only history tables have no valid_to: use lakehistory.as_of(relation, lakehistory.current_version(relation))") }}
  {%- elif lakehistory.open_end() == 'null' -%}
    {{- return(p ~ '`valid_to` is null') -}}
  {%- else -%}
    {{- return(p ~ '`valid_to` = ' ~ lakehistory.open_version()) -}}
  {%- endif -%}
{% endmacro %}


{#- The version a transaction writes, as SQL: its id, or its time. -#}
{% macro version_value(txn_id, txn_time) %}
  {{- return(txn_id if lakehistory.version_type() == 'integer' else "timestamp'" ~ txn_time ~ "'") -}}
{% endmacro %}
