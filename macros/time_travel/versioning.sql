{#-
  How history tables write transaction time, set once for the whole project (dbt_project.yml vars);
  choose before the first build, since existing tables keep the form they were built with.

    lakehistory_version_type  'integer' (default): valid_from/valid_to hold transaction ids.
                              'timestamp': they hold each transaction's time (its started_at,
                              strictly increasing across transactions).
    lakehistory_open_end      'max' (default): a current row's valid_to is the largest value of
                              the type (keeps as-of filters plain range predicates).
                              'null': a current row's valid_to is NULL.
                              A value of the version type (Atoti's validRowToColumnValue): an
                              integer such as 2147483647, or a time such as '2099-12-31
                              23:59:59'. Every version must stay below it; a run that would
                              reach it is refused.
    lakehistory_append_only   false (default), or true: Atoti's append-only case. A history
                              table has valid_from only and no row is ever updated or deleted
                              (a batch that would is refused), so as of v the table is every row
                              with valid_from <= v. (A table written before lakehistory 0.2.0
                              may hold `removal` rows: as of v, a (key, _fivetran_start) row is
                              its latest version with valid_from <= v, unless that is a removal.)
-#}
{% macro version_type() %}
  {{ return(adapter.dispatch('version_type', 'lakehistory')()) }}
{% endmacro %}

{% macro default__version_type() %}
  {%- set value = var('lakehistory_version_type', 'integer') -%}
  {%- if value not in ('integer', 'timestamp') -%}
    {{ exceptions.raise_compiler_error("var lakehistory_version_type must be 'integer' or 'timestamp', not " ~ value) }}
  {%- endif -%}
  {{- return(value) -}}
{% endmacro %}


{% macro open_end() %}
  {{ return(adapter.dispatch('open_end', 'lakehistory')()) }}
{% endmacro %}

{#- 'max', 'null', or the chosen value as text (an integer, or a time). -#}
{% macro default__open_end() %}
  {%- set value = (var('lakehistory_open_end', 'max') | string).strip() -%}
  {%- if value in ('max', 'null') -%}{{ return(value) }}{%- endif -%}
  {%- set integer = lakehistory.version_type() == 'integer' -%}
  {%- set pattern = '-?[0-9]{1,19}' if integer else '[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,6})?)?)?' -%}
  {%- if not modules.re.fullmatch(pattern, value) -%}
    {{ exceptions.raise_compiler_error("var lakehistory_open_end must be 'max', 'null' or "
        ~ ("an integer" if integer else "a time such as '2099-12-31 23:59:59'") ~ ", not " ~ value) }}
  {%- endif -%}
  {{- return(value) -}}
{% endmacro %}


{% macro append_only() %}
  {{ return(adapter.dispatch('append_only', 'lakehistory')()) }}
{% endmacro %}

{% macro default__append_only() %}
  {{- return(var('lakehistory_append_only', false) in (true, 'true', 'True')) -}}
{% endmacro %}


{#- The SQL type of valid_from / valid_to. -#}
{% macro version_sql_type() %}
  {{ return(adapter.dispatch('version_sql_type', 'lakehistory')()) }}
{% endmacro %}

{% macro default__version_sql_type() %}
  {{- return('bigint' if lakehistory.version_type() == 'integer' else 'timestamp') -}}
{% endmacro %}


{#- What an open valid_to means: the open end the project chose, else the type's largest value. -#}
{% macro end_of_time() %}
  {{ return(adapter.dispatch('end_of_time', 'lakehistory')()) }}
{% endmacro %}

{% macro default__end_of_time() %}
  {%- set value = lakehistory.open_end() -%}
  {%- if value in ('max', 'null') -%}
    {{- return(lakehistory._names()['end_of_time'][lakehistory.version_type()]) -}}
  {%- endif -%}
  {{- return(value if lakehistory.version_type() == 'integer' else "timestamp'" ~ value.replace('T', ' ') ~ "'") -}}
{% endmacro %}


{#- The valid_to a current row is written with, as SQL. -#}
{% macro open_version() %}
  {{ return(adapter.dispatch('open_version', 'lakehistory')()) }}
{% endmacro %}

{% macro default__open_version() %}
  {{- return('null' if lakehistory.open_end() == 'null' else lakehistory.end_of_time()) -}}
{% endmacro %}


{#- A predicate: the row (alias or none) is current in transaction time. For an append-only table
    it applies to lakehistory.versioned(relation), whose derived valid_to is NULL while open. -#}
{% macro is_current(alias=none) %}
  {{ return(adapter.dispatch('is_current', 'lakehistory')(alias)) }}
{% endmacro %}

{% macro default__is_current(alias=none) %}
  {%- set column = ((alias ~ '.') if alias else '') ~ '`valid_to`' -%}
  {%- if lakehistory.open_end() == 'null' or lakehistory.append_only() -%}
    {{- return(column ~ ' is null') -}}
  {%- endif -%}
  {{- return(column ~ ' = ' ~ lakehistory.end_of_time()) -}}
{% endmacro %}


{#- The version a transaction writes, as SQL: its id, or its time. -#}
{% macro version_value(txn_id, txn_time) %}
  {{ return(adapter.dispatch('version_value', 'lakehistory')(txn_id, txn_time)) }}
{% endmacro %}

{% macro default__version_value(txn_id, txn_time) %}
  {{- return(txn_id if lakehistory.version_type() == 'integer' else "timestamp'" ~ txn_time ~ "'") -}}
{% endmacro %}
