{#-
  inspect(command, args), as a run-operation: the `lakehistory` command's answers (status, log,
  timeline, diff, as-of, tags; lakehistory/src/lakehistory/command). This macro says what the project
  knows: its history tables and extract snapshots with their landed sources, the transactions
  table, and each history table's time-travel SQL (as_of and versioned, the rules every query of
  the project uses), reading its version from a one-row view the Python side fills.

      lakehistory status --project-dir integration_tests --profiles-dir integration_tests
      dbt run-operation lakehistory.inspect --args '{command: status, args: {}}'
-#}
{% macro inspect(command, args={}) %}
  {{ return(adapter.dispatch('inspect', 'lakehistory')(command, args)) }}
{% endmacro %}

{% macro default__inspect(command, args={}) %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set tables = [] -%}
  {%- for node in graph.nodes.values() if node.config.enabled -%}
    {%- set meta = (node.config.meta or {}).get('lakehistory') or {} -%}
    {%- set kind = 'history' if node.resource_type == 'model' and node.config.get('incremental_strategy') == 'fivetran_history'
        else 'snapshot' if node.resource_type == 'snapshot' and meta.get('extract') else none -%}
    {%- if kind -%}
      {%- set relation = lakehistory._node_relation(node) -%}
      {%- set source = lakehistory._landed_source(node) -%}
      {%- set entry = {
          'name': node.name,
          'kind': kind,
          'relation': relation | string,
          'key': lakehistory._as_list(node.config.get('unique_key')),
          'source_table': source.name if source else none,
          'landing_root': source.landing_root if source else none,
      } -%}
      {%- if kind == 'history' -%}
        {%- do entry.update({'versioned': lakehistory.versioned(relation) | string}) -%}
        {%- for name in ('version', 'v1', 'v2') -%}
          {%- set version = '(select `version` from `__lakehistory_inspect_' ~ name ~ '`)' -%}
          {%- do entry.update({'as_of' ~ ('' if name == 'version' else '_' ~ name): lakehistory.as_of(relation, version)}) -%}
        {%- endfor -%}
      {%- endif -%}
      {%- do tables.append(entry) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- do lakehistory._engine('inspect', {
      'command': command,
      'args': args,
      'tables': tables,
      'visible_sql': lakehistory.visible_txn_sql(),
      'incomplete_syncs_sql': lakehistory.incomplete_syncs_sql(),
  }) -%}
{% endmacro %}


{#- The landed source a node reads, through the models between them (none if it reads none). -#}
{% macro _landed_source(node) %}
  {%- set level = namespace(ids=node.depends_on.nodes | list) -%}
  {%- for _ in range(10) -%}
    {%- set upstream = [] -%}
    {%- for id in level.ids -%}
      {%- if id in graph.sources -%}
        {%- set found = graph.sources[id] -%}
        {%- set root = ((found.meta or {}).get('lakehistory') or {}).get('landing_root')
            or ((found.source_meta or {}).get('lakehistory') or {}).get('landing_root') -%}
        {%- if root -%}
          {{ return({'name': found.name, 'landing_root': root}) }}
        {%- endif -%}
      {%- elif id in graph.nodes -%}
        {%- do upstream.extend(graph.nodes[id].depends_on.nodes) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set level.ids = upstream -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}
