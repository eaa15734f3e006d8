{#-
  The one door to the engine (lakehistory/src/lakehistory/door.py): every call from the package's
  macros to its Python goes through `_engine`, which names a function of that module and adds the
  context the engine needs of the project, built here once. tests/test_door.py checks that each
  entry a macro names exists there and takes the arguments the macro passes.
-#}
{% macro _engine(entry, arguments={}) %}
  {%- set request = {'context': lakehistory._engine_context()} -%}
  {%- do request.update(arguments) -%}
  {{ return(adapter.call_python('lakehistory.door:' ~ entry, request)) }}
{% endmacro %}


{#- What the project says once for every entry point (lakehistory.door.Context). -#}
{% macro _engine_context() %}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return({
      'transactions': transactions | string,
      'writer_lock': lakehistory.writer_lock_relation() | string,
      'history_tables': lakehistory._history_relations(),
      'invocation_id': invocation_id,
      'writer_wait_seconds': var('lakehistory_writer_wait_seconds', 600),
      'versioning': {
          'version_type': lakehistory.version_type(),
          'open_end': lakehistory.open_end(),
          'append_only': lakehistory.append_only(),
      },
      'database_id': lakehistory.database_id(),
  }) }}
{% endmacro %}


{#- Every history table of the project (as relation names), for the ledger's recovery. -#}
{% macro _history_relations() %}
  {%- set relations = [] -%}
  {%- for node in lakehistory.history_nodes() -%}
    {%- do relations.append(lakehistory._relation_of(node)) -%}
  {%- endfor -%}
  {{ return(relations) }}
{% endmacro %}
