{#-
  landing_extract(source_name, table_name)

  For a dbt snapshot of a table that lands as daily full extracts: the oldest extract the snapshot
  has not captured yet (or, when it has them all, the latest again, which changes nothing), typed
  by the source entry's columns and validated, with `extracted_at` and `extracted_by`. Returns a
  relation to select from (the Delta table `<snapshot>__lh_extract`, rewritten each run). One
  extract per run keeps each day's changes at their own time.

  Call it from an ephemeral staging model that names its snapshot, and point the snapshot at it:

      -- models/stg_crmp_extracts__meta_vars.sql
      {{ config(materialized='ephemeral') }}
      select * from {{ lakehistory.landing_extract('crmp_extracts', 'meta_vars', 'meta_vars_snapshot') }}

      # snapshots/crmp_extracts__snapshots.yml
      snapshots:
        - name: meta_vars_snapshot
          relation: ref('stg_crmp_extracts__meta_vars')
          config:
            unique_key: vars_id
            strategy: check
            check_cols: [...the table's columns...]
            updated_at: extracted_at
            hard_deletes: new_record
            meta: {lakehistory: {extract: true}}
            post_hook: "{{ lakehistory.record_capture('meta_vars') }}"

  `meta.lakehistory.extract` makes the snapshot's clock the extract's time (rows it closes or marks
  deleted), and the post-hook records the capture as a transaction. A bad extract stops the run
  with an error naming the file, data row and column; the snapshot is left as it was.
-#}
{% macro landing_extract(source_name, table_name, snapshot_name=none) %}
  {{ return(adapter.dispatch('landing_extract', 'lakehistory')(source_name, table_name, snapshot_name)) }}
{% endmacro %}

{% macro default__landing_extract(source_name, table_name, snapshot_name=none) %}
  {%- set relation = source(source_name, table_name) -%}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set landed = lakehistory._landed_table(source_name, table_name) -%}
  {%- set snapshot = lakehistory._snapshot_relation(snapshot_name) if snapshot_name else this -%}
  {%- set staged = lakehistory.staged_extract(snapshot) -%}
  {%- if not lakehistory._builds() -%}
    {{ return(staged) }}
  {%- endif -%}
  {%- do lakehistory._engine('stage_extract', {
      'staged': staged | string,
      'landing_root': landed.landing_root,
      'table': table_name,
      'key': landed.key,
      'columns': landed.columns,
      'snapshot': snapshot | string,
  }) -%}
  {{ return(staged) }}
{% endmacro %}


{% macro _snapshot_relation(name) %}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type == 'snapshot' and node.name == name -%}
      {{ return(api.Relation.create(schema=node.schema, identifier=node.alias or node.name, type='table')) }}
    {%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("No snapshot " ~ name ~ " in the project.") }}
{% endmacro %}


{#- The extract a snapshot captures in this run, typed: a Delta table beside the snapshot. -#}
{% macro staged_extract(snapshot) %}
  {{ return(adapter.dispatch('staged_extract', 'lakehistory')(snapshot)) }}
{% endmacro %}

{% macro default__staged_extract(snapshot) %}
  {{ return(api.Relation.create(schema=snapshot.schema, identifier=snapshot.identifier ~ '__lh_extract', type='table')) }}
{% endmacro %}
