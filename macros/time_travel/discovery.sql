{#-
  Version discovery. current_version(relation, period=none): the table's current version, the
  largest version in its valid_from or (closed) valid_to; an empty table has the var
  `lakehistory_empty_version` (default 0). Any other history is read by its period (period.sql),
  whose open end is no version. current_versions(): one row per history table of the project
  (table_name, version).
-#}
{% macro current_version(relation, period=none) %}
  {{ return(adapter.dispatch('current_version', 'lakehistory')(relation, period)) }}
{% endmacro %}

{% macro default__current_version(relation, period=none) %}
  {%- set empty = var('lakehistory_empty_version', 0 if lakehistory.version_type() == 'integer' else '0001-01-01 00:00:00') -%}
  {%- set empty = empty if lakehistory.version_type() == 'integer' else "timestamp'" ~ empty ~ "'" -%}
  {%- set p = lakehistory.period_of(relation, period) -%}
  {%- if p.kind != 'history' -%}
    {%- set newest = 'max(' ~ p.from ~ ')' -%}
    {%- if p.to is not none -%}
      {%- set newest = 'greatest(' ~ newest ~ ', max(' ~ (('nullif(' ~ p.to ~ ', ' ~ p.open ~ ')') if p.open else p.to) ~ '))' -%}
    {%- endif -%}
    {{- return("(select coalesce(" ~ newest ~ ", " ~ empty ~ ") from " ~ p.rows ~ " as `newest`)") -}}
  {%- endif -%}
  {%- if lakehistory.append_only() -%}
    {#- a removal row is a transaction too: every row has valid_from only -#}
    {{- return("(select coalesce(max(`valid_from`), " ~ empty ~ ") from " ~ relation ~ ")") -}}
  {%- endif -%}
  {{- return("(select coalesce(greatest(max(`newest`.`valid_from`), max(nullif(`newest`.`valid_to`, " ~ lakehistory.end_of_time()
      ~ "))), " ~ empty ~ ") from " ~ relation ~ " as `newest`)") -}}
{% endmacro %}


{% macro current_versions() %}
  {{ return(adapter.dispatch('current_versions', 'lakehistory')()) }}
{% endmacro %}

{% macro default__current_versions() %}
  {%- set parts = [] -%}
  {%- for node in lakehistory.history_nodes() -%}
    {%- set relation = api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) -%}
    {%- do parts.append("select " ~ lakehistory._text(node.name) ~ " as table_name, " ~ lakehistory.current_version(relation) ~ " as version") -%}
  {%- endfor -%}
  {%- if not parts -%}
    {{ return("(select cast(null as string) as table_name, cast(null as bigint) as version where false)") }}
  {%- endif -%}
  {{- return("(" ~ (parts | join(" union all ")) ~ ")") -}}
{% endmacro %}


{#- The project's history tables: models built by the fivetran_history strategy. -#}
{% macro history_nodes() %}
  {{ return(adapter.dispatch('history_nodes', 'lakehistory')()) }}
{% endmacro %}

{% macro default__history_nodes() %}
  {%- set nodes = [] -%}
  {%- if not execute -%}{{ return(nodes) }}{%- endif -%}
  {%- for node in graph.nodes.values() -%}
    {%- if lakehistory._is_history_node(node) -%}
      {%- do nodes.append(node) -%}
    {%- endif -%}
  {%- endfor -%}
  {{- return(nodes | sort(attribute='name')) -}}
{% endmacro %}
