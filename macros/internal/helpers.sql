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


{#- Refuses `--full-refresh` of a table the product keeps history in (`what` says which kind), before
    anything is dropped: a rebuild would lose what no landing gives back. Nothing happens on a
    first build, on a build without `--full-refresh`, or for a model that sets `full_refresh=false`. -#}
{% macro _refuse_full_refresh(what, relation=this, asked=none) %}
  {%- set asked = should_full_refresh() if asked is none else asked -%}
  {%- if lakehistory._builds() and asked and load_relation(relation) is not none -%}
    {{ exceptions.raise_compiler_error(lakehistory._full_refresh_message(what, relation)) }}
  {%- endif -%}
{% endmacro %}

{% macro _full_refresh_message(what, relation) %}
  {{- return(model.name ~ ": --full-refresh would drop " ~ relation ~ ", " ~ what ~ ", and lose history no"
      ~ " rebuild gives back; lakehistory refuses, and nothing was changed. Run it without --full-refresh (it"
      ~ " applies what is pending), or set full_refresh=false in its config to leave it out of a"
      ~ " project-wide --full-refresh. To correct its history, revert or undo (docs/time-travel.md). To start"
      ~ " a new history on purpose, give the model a new alias: it builds from the start, and this table"
      ~ " stays until you drop it.") -}}
{% endmacro %}


{#- A SQL string literal holding `text` (a column or table name, never a data value): quotes and
    backslashes escaped, so a name like it's stays one literal. -#}
{% macro _text(text) %}
  {{- return("'" ~ (text | string | replace("\\", "\\\\") | replace("'", "\\'")) ~ "'") -}}
{% endmacro %}
