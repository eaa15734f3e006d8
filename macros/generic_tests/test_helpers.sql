{#- Shared by the generic tests in tests/generic: column arguments may be one name or a list. -#}

{#- The argument as a list of column names. -#}
{% macro _test_columns(columns) %}
  {{- return([columns] if columns is string else (columns | list)) -}}
{% endmacro %}


{#- The columns, quoted and prefixed with an alias, as a select list (`a`.`x`, `a`.`y`). -#}
{% macro _test_select(columns, alias=none) %}
  {%- set prefix = (alias ~ '.') if alias else '' -%}
  {%- set out = [] -%}
  {%- for c in lakehistory._test_columns(columns) -%}
    {%- do out.append(prefix ~ adapter.quote(c)) -%}
  {%- endfor -%}
  {{- return(out | join(', ')) -}}
{% endmacro %}


{#- SQL text naming a row by its columns, for a failure's `problem`: 'station_id=28, ...'. -#}
{% macro _test_describe(columns, alias=none) %}
  {%- set prefix = (alias ~ '.') if alias else '' -%}
  {%- set parts = [] -%}
  {%- for c in lakehistory._test_columns(columns) -%}
    {%- do parts.append("'" ~ (c | replace("'", "\\'")) ~ "=', coalesce(cast(" ~ prefix ~ adapter.quote(c) ~ " as string), 'NULL')") -%}
  {%- endfor -%}
  {{- return("concat(" ~ (parts | join(", ', ', ")) ~ ")") -}}
{% endmacro %}


{#- Null-safe equality of the first n columns k0, k1, ... of two aliases. -#}
{% macro _join_on_columns(left, right, n) %}
  {%- set parts = [] -%}
  {%- for i in range(n) -%}
    {%- do parts.append(left ~ '.k' ~ i ~ ' <=> ' ~ right ~ '.k' ~ i) -%}
  {%- endfor -%}
  {{- return('(' ~ (parts | join(' and ')) ~ ')') -}}
{% endmacro %}
