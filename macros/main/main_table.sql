{#-
  Incremental strategy `main_table`: a main table people can correct with plain SQL (seed 003's
  domain table, "function exactly as before").

      {{ config(materialized='incremental', incremental_strategy='main_table', unique_key=['station_id']) }}
      select * from {{ lakehistory.hx_current(ref('meta_station_hx')) }}

  The table is a Delta table with Change Data Feed on and the constraints its history table and
  the model declare; each build makes it equal to the model's rows without dropping it. The
  history model it is built from (found up its lineage) reads people's commits of it on its next
  run, each as an `edit` transaction. The work is done by lakehistory.main_table (Python, through
  lakehistory.door).
-#}
{% macro get_incremental_main_table_sql(arg_dict) %}
  {{ return(adapter.dispatch('get_incremental_main_table_sql', 'lakehistory')(arg_dict)) }}
{% endmacro %}

{% macro default__get_incremental_main_table_sql(arg_dict) %}
  {%- set keys = lakehistory._as_list(arg_dict['unique_key']) -%}
  {%- if not keys -%}
    {{ exceptions.raise_compiler_error("main_table: set unique_key to the table's key column(s) in " ~ model.name ~ "'s config.") }}
  {%- endif -%}
  {%- set history = lakehistory._history_of_main_table(model) -%}
  {%- set constraints = lakehistory._declared_constraints(model) -%}
  {%- set outcome = lakehistory._engine('refresh_main_table', {
      'target': arg_dict['target_relation'] | string,
      'staged': arg_dict['temp_relation'] | string,
      'keys': keys,
      'history': history,
      'not_null': constraints['not_null'],
      'checks': constraints['checks'],
  }) -%}
  select {{ outcome['rows_changed'] | int }} as rows_changed
{% endmacro %}


{#- The relation of the history model a main-table model is built from, whose next run reads the
    table's edits: up its lineage through models, an `_hx` model leads to the history model it
    names as its `source` (not to the parents of its history foreign keys). None when there is
    none (a table fed by extracts: correct those by landing a corrected extract). Two are refused:
    an edit would have no one history to go to. -#}
{% macro _history_of_main_table(node) %}
  {%- set found = [] -%}
  {%- set seen = [] -%}
  {%- set walk = namespace(frontier=[node]) -%}
  {%- for _ in range(10) if walk.frontier -%}
    {%- set next = [] -%}
    {%- for current in walk.frontier -%}
      {%- for parent_id in (current.get('depends_on') or {}).get('nodes', []) if parent_id not in seen -%}
        {%- do seen.append(parent_id) -%}
        {%- set parent = graph.nodes.get(parent_id) -%}
        {%- set hx_source = ((parent.config.get('meta') or {}).get('lakehistory') or {}).get('hx', {}).get('source') if parent else none -%}
        {%- if parent and lakehistory._is_history_node(parent) -%}
          {%- do found.append(lakehistory._relation_of(parent)) -%}
        {%- elif hx_source -%}
          {%- for candidate in graph.nodes.values()
                if candidate.name == hx_source and lakehistory._is_history_node(candidate)
                   and candidate.package_name == parent.package_name -%}
            {%- do found.append(lakehistory._relation_of(candidate)) -%}
          {%- endfor -%}
        {%- elif parent and parent.resource_type == 'model' -%}
          {%- do next.append(parent) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endfor -%}
    {%- set walk.frontier = next -%}
  {%- endfor -%}
  {%- set found = found | unique | list -%}
  {%- if found | length > 1 -%}
    {{ exceptions.raise_compiler_error(node.name ~ ": a main table takes edits into one history table, and this one is"
        ~ " built from " ~ (found | join(', ')) ~ ". Build it from one, or make it a view (not editable).") }}
  {%- endif -%}
  {{ return(found[0] if found else none) }}
{% endmacro %}


{#- The main tables built from the history table `history` (a relation name), as relation names. -#}
{% macro _main_tables_of(history) %}
  {%- set found = [] -%}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'model' and node.config.get('incremental_strategy') == 'main_table'
          and lakehistory._history_of_main_table(node) == history -%}
      {%- do found.append(lakehistory._relation_of(node)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if found | length > 1 -%}
    {{ exceptions.raise_compiler_error(history ~ " feeds the main tables " ~ (found | join(', ')) ~ ": edits of two main"
        ~ " tables could contradict each other. Keep one main table per history table.") }}
  {%- endif -%}
  {{ return(found[0] if found else none) }}
{% endmacro %}


{#- The model's contract constraints the main table carries: NOT NULL columns and CHECKs, as
    dbt declares them (`constraints:` of a column or of the model). Primary and foreign keys are
    documentation in OSS Delta, which does not record them. -#}
{% macro _declared_constraints(node) %}
  {%- set not_null = [] -%}
  {%- set checks = [] -%}
  {%- for column in (node.columns or {}).values() -%}
    {%- for c in column.get('constraints') or [] -%}
      {%- if c.type == 'not_null' -%}
        {%- do not_null.append(column.name) -%}
      {%- elif c.type == 'check' -%}
        {%- do checks.append([c.name or (column.name ~ '_check'), c.expression]) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- for c in node.get('constraints') or [] if c.type == 'check' -%}
    {%- do checks.append([c.name or (node.name ~ '_check_' ~ loop.index), c.expression]) -%}
  {%- endfor -%}
  {{ return({'not_null': not_null, 'checks': checks}) }}
{% endmacro %}
