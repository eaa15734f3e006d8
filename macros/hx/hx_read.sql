{#-
  Reading `_hx` tables (seed 003). An `_hx` model says what it is in its YAML
  (meta.lakehistory.hx: table, key, source, foreign_keys); these macros read that, so they take
  just the relation. The reading of an `_hx` table at time T: per key, the row with the greatest
  (mod_time, id) at or before T; the key exists at T unless that row is a deletion.

    hx_current(relation)              the main table: current rows, main columns + mod_time, mod_user
    hx_as_of(relation, at, txn=none)  rows current at valid time `at` (an SQL timestamp expression),
                                      with their history ids and history foreign keys; with `txn`,
                                      only what transaction `txn` and earlier recorded ("as known then")
    database_as_of(at, txn=none)      one CTE per `_hx` model, named like its main table:
                                      `with {{ lakehistory.database_as_of(t) }} select ... from obs_raw ...`
    hx_resolved(relation)             every row with each history foreign key also resolved against
                                      the parent rows known now: `<parent>_hx_id_valid` (late parents)
-#}

{% macro hx_current(relation) %}
  {{ return(adapter.dispatch('hx_current', 'lakehistory')(relation)) }}
{% endmacro %}

{% macro default__hx_current(relation) %}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set hx = lakehistory._hx_config(relation) -%}
  {%- set main = lakehistory._hx_main_columns(relation, hx) -%}
  {{ return('(select ' ~ lakehistory._columns(main + ['mod_time', 'mod_user'], none) ~ ' from '
      ~ lakehistory._hx_latest(relation, hx, none, none) ~ ' as h where not h.`deleted`)') }}
{% endmacro %}


{% macro hx_as_of(relation, at, txn=none) %}
  {{ return(adapter.dispatch('hx_as_of', 'lakehistory')(relation, at, txn)) }}
{% endmacro %}

{% macro default__hx_as_of(relation, at, txn=none) %}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set hx = lakehistory._hx_config(relation) -%}
  {%- set keep = adapter.get_columns_in_relation(relation) | map(attribute='name') | reject('equalto', 'deleted') | list -%}
  {{ return('(select ' ~ lakehistory._columns(keep, none) ~ ' from '
      ~ lakehistory._hx_latest(relation, hx, at, txn) ~ ' as h where not h.`deleted`)') }}
{% endmacro %}


{% macro database_as_of(at, txn=none) %}
  {{ return(adapter.dispatch('database_as_of', 'lakehistory')(at, txn)) }}
{% endmacro %}

{% macro default__database_as_of(at, txn=none) %}
  {%- if not execute -%}
    {{ return('not_executed as (select 1)') }}
  {%- endif -%}
  {%- set ctes = [] -%}
  {%- for node in graph.nodes.values() | selectattr('resource_type', 'equalto', 'model') -%}
    {%- set hx = ((node.config.meta or {}).get('lakehistory') or {}).get('hx') -%}
    {%- if hx and node.config.enabled -%}
      {%- do ctes.append(adapter.quote(hx.table) ~ ' as ' ~ lakehistory.hx_as_of(lakehistory._node_relation(node), at, txn)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if not ctes -%}
    {{ exceptions.raise_compiler_error("database_as_of: the project has no _hx model (meta.lakehistory.hx)") }}
  {%- endif -%}
  {{ return(ctes | join(',\n')) }}
{% endmacro %}


{#- Late parents: a history foreign key is resolved once, when its row is recorded. A parent
    version that arrives later with an earlier valid time does not move it; `<parent>_hx_id_valid`
    is the parent row current at the child's mod_time among all parent rows known now (the
    parent's first row if it began later), by the same as-of rule. -#}
{% macro hx_resolved(relation) %}
  {{ return(adapter.dispatch('hx_resolved', 'lakehistory')(relation)) }}
{% endmacro %}

{% macro default__hx_resolved(relation) %}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set hx = lakehistory._hx_config(relation) -%}
  {%- set foreign_keys = [] -%}
  {%- for fk in hx.get('foreign_keys') or [] -%}
    {%- set parent = lakehistory._model_relation(fk.parent) -%}
    {%- set parent_table = lakehistory._hx_config(parent).table -%}
    {%- do foreign_keys.append({
          'columns': fk.columns,
          'parent': parent | string,
          'parent_columns': fk.get('parent_columns') or fk.columns,
          'parent_id': parent_table ~ '_hx_id',
          'resolved_as': parent_table ~ '_hx_id_valid',
        }) -%}
  {%- endfor -%}
  {#- the rule the build resolves with (lakehistory.hx.history_fk_sql), over the parent rows known now -#}
  {{ return(lakehistory._engine('hx_resolved_sql', {'relation': relation | string, 'foreign_keys': foreign_keys})) }}
{% endmacro %}


{#- Per key, the reading's row at `at` (or now): the greatest (mod_time, id), deletions included. -#}
{% macro _hx_latest(relation, hx, at, txn) %}
  {%- set id = adapter.quote(hx.table ~ '_hx_id') -%}
  {%- set filters = [] -%}
  {%- if at is not none -%}{%- do filters.append('`mod_time` <= ' ~ at) -%}{%- endif -%}
  {%- if txn is not none -%}{%- do filters.append('`txn_id` <= ' ~ (txn | int)) -%}{%- endif -%}
  {%- set sql -%}
    (select * from (
        select *, row_number() over (
            partition by {{ lakehistory._columns(hx.key, none) }} order by `mod_time` desc, {{ id }} desc) as `_lh_rank`
        from {{ relation }}
        {%- if filters %} where {{ filters | join(' and ') }}{% endif %}
    ) where `_lh_rank` = 1)
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}


{#- A model's relation from the graph: ref() inside these macros would hide the dependency. -#}
{% macro _node_relation(node) %}
  {{ return(api.Relation.create(schema=node.schema, identifier=node.alias or node.name, type="table")) }}
{% endmacro %}


{% macro _model_relation(name) %}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'model' and node.name == name -%}
      {{ return(lakehistory._node_relation(node)) }}
    {%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("No model " ~ name ~ " in the project.") }}
{% endmacro %}


{% macro _hx_config(relation) %}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'model' and (node.alias or node.name) == relation.identifier -%}
      {%- set hx = ((node.config.meta or {}).get('lakehistory') or {}).get('hx') -%}
      {%- if hx -%}
        {{ return(hx) }}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error(relation ~ " is not an _hx model (no meta.lakehistory.hx in its YAML)") }}
{% endmacro %}


{#- The main table's columns: everything but the _hx system columns. -#}
{% macro _hx_main_columns(relation, hx) %}
  {%- set system = ['mod_time', 'mod_user', 'deleted', 'txn_id', hx.table ~ '_hx_id'] -%}
  {%- for fk in hx.get('foreign_keys') or [] -%}
    {%- do system.append(fk.parent[:-3] ~ '_hx_id' if fk.parent.endswith('_hx') else fk.parent ~ '_hx_id') -%}
  {%- endfor -%}
  {{ return(adapter.get_columns_in_relation(relation) | map(attribute='name') | reject('in', system) | list) }}
{% endmacro %}
