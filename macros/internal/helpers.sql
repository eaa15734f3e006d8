{#- Helpers the package's macros share: lists, quoted column lists, join conditions. -#}

{% macro _as_list(value) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {{ return([value] if value is string else value | list) }}
{% endmacro %}


{#- `a`.`x`, `a`.`y`, ... (or unqualified when alias is none) -#}
{% macro _columns(names, alias) %}
  {%- set quoted = [] -%}
  {%- for name in names -%}
    {%- do quoted.append((alias ~ '.' if alias else '') ~ adapter.quote(name)) -%}
  {%- endfor -%}
  {{- return(quoted | join(', ')) -}}
{% endmacro %}


{% macro _join_on(left, right, keys) %}
  {%- set pairs = [] -%}
  {%- for key in keys -%}
    {%- do pairs.append(left ~ '.' ~ adapter.quote(key) ~ ' = ' ~ right ~ '.' ~ adapter.quote(key)) -%}
  {%- endfor -%}
  {{- return(pairs | join(' and ')) -}}
{% endmacro %}


{#- Whether this invocation builds: stages landed files and writes tables. `dbt compile`, `dbt docs
    generate` and `dbt ls` render SQL only: they read no landing file and write no table. -#}
{% macro _builds() %}
  {{ return(execute and flags.WHICH not in ('compile', 'generate', 'list', 'ls', 'parse')) }}
{% endmacro %}


{#- A SQL string literal holding `text` (a column or table name, never a data value): quotes and
    backslashes escaped, so a name like it's stays one literal. -#}
{% macro _text(text) %}
  {{- return("'" ~ (text | string | replace("\\", "\\\\") | replace("'", "\\'")) ~ "'") -}}
{% endmacro %}
