{#-
  The one door to the engine (lakehistory/src/lakehistory/door.py): every call from the package's
  macros to its Python goes through `_engine`, which names a function of that module and adds the
  context the engine needs of the project, built here once. tests/test_door.py checks that each
  entry a macro names exists there and takes the arguments the macro passes.
-#}
{% macro _engine(entry, arguments={}) %}
  {%- set request = {'context': lakehistory._engine_context(with_project=entry != 'project_known')} -%}
  {%- do request.update(arguments) -%}
  {{ return(adapter.call_python('lakehistory.door:' ~ entry, request)) }}
{% endmacro %}


{#- What the project says once for every entry point (lakehistory.door.Context). What dbt's graph
    says of it (`_engine_project`) goes with the first call of an invocation only: the door keeps
    it for the others, so that no call walks the graph again. -#}
{% macro _engine_context(with_project=true) %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {%- set context = {
      'transactions': transactions | string,
      'writer_lock': lakehistory.writer_lock_relation() | string,
      'invocation_id': invocation_id,
      'writer_wait_seconds': var('lakehistory_writer_wait_seconds', 600),
      'versioning': {
          'version_type': lakehistory.version_type(),
          'open_end': lakehistory.open_end(),
          'append_only': lakehistory.append_only(),
      },
      'database_id': lakehistory.database_id(),
  } -%}
  {%- if with_project and not (execute and lakehistory._engine('project_known')) -%}
    {%- do context.update(lakehistory._engine_project()) -%}
  {%- endif -%}
  {{ return(context) }}
{% endmacro %}


{#- One walk of dbt's graph: every history table of the project (relation names, for the ledger's
    recovery) and the nodes a model builds feature states from (lakehistory.feature_states: their
    batches must name their application, seed 002). Complete only once dbt executes: a project
    rendered while dbt parses has no graph yet, and the door does not keep it. -#}
{% macro _engine_project() %}
  {%- if not execute -%}
    {{ return({'history_tables': [], 'feature_state_inputs': [], 'project_complete': false}) }}
  {%- endif -%}
  {%- set relations = [] -%}
  {%- for node in lakehistory.history_nodes() -%}
    {%- do relations.append(lakehistory._relation_of(node)) -%}
  {%- endfor -%}
  {%- set feature_state_inputs = [] -%}
  {%- for node in graph.nodes.values() -%}
    {%- set depends_on = node.get('depends_on') or {} -%}
    {%- if 'macro.lakehistory.feature_states' in (depends_on.get('macros') or []) -%}
      {%- do feature_state_inputs.extend(depends_on.get('nodes') or []) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'history_tables': relations, 'feature_state_inputs': feature_state_inputs, 'project_complete': true}) }}
{% endmacro %}
