{#-
  landing_batches(source_name, table_name)

  The batches of a landed table that are not applied yet, staged: every cell read as a string,
  the batch's null/unmodified tokens resolved, cast by column name to the types of the source
  entry, validated. Returns a relation name to select from:

      select * from {{ lakehistory.landing_batches('crmp_landing', 'meta_station') }}

  The source entry says where and what:
      sources:
        - name: crmp_landing
          meta: {lakehistory: {landing_root: "s3a://bucket/landing"}}   # or a local folder
          tables:
            - name: meta_station
              meta: {lakehistory: {key: [station_id]}}
              columns:                       # every column, with its Spark SQL type
                - {name: station_id, data_type: bigint}
                - ...
  A bad batch stops the run with an error naming the batch, file, data row and column.
-#}
{% macro landing_batches(source_name, table_name) %}
  {{ return(adapter.dispatch('landing_batches', 'lakehistory')(source_name, table_name)) }}
{% endmacro %}

{% macro default__landing_batches(source_name, table_name) %}
  {%- set relation = source(source_name, table_name) -%}
  {%- if not execute -%}
    {{ return('(select 1 as not_executed)') }}
  {%- endif -%}
  {%- set landed = lakehistory._landed_table(source_name, table_name) -%}
  {%- set history = lakehistory._history_consumer(model, source_name, table_name) -%}
  {%- set view = '__lakehistory_pending__' ~ source_name ~ '__' ~ table_name ~ ('__' ~ history.identifier if history else '') -%}
  {%- if not lakehistory._builds() -%}
    {{ return(adapter.quote(view)) }}
  {%- endif -%}
  {%- set read_for_run = lakehistory._engine('landing_read_for_run') -%}
  {%- do lakehistory._engine('stage_batches', {
      'view': view,
      'landing_root': landed.landing_root,
      'table': table_name,
      'key': landed.key,
      'columns': landed.columns,
      'run_tables': [] if read_for_run else lakehistory._run_landed_tables(),
      'project_tables': [] if read_for_run else lakehistory._project_landed_tables(),
      'model_id': model.unique_id,
      'not_null': landed.not_null,
      'history_table': history | string if history else none,
      'edits_from': lakehistory._main_tables_of(history | string) if history else none,
  }) -%}
  {{ return(adapter.quote(view)) }}
{% endmacro %}


{#- The landed tables this invocation stages, as [landing_root, table, history table] triples: the
    lakehistory sources of its selected nodes, read from directly or through ephemeral models, with
    the history table of a selected history model ('' for another node). The first staging of a
    run reads them all at once (lakehistory.landing.run_reads). -#}
{% macro _run_landed_tables() %}
  {%- set tables = [] -%}
  {%- for unique_id in (selected_resources or []) -%}
    {%- set node = graph.nodes.get(unique_id) -%}
    {#- an ephemeral model runs inside its readers, which are selected with it -#}
    {%- if node and node.config.materialized != 'ephemeral' -%}
      {%- set history = lakehistory._relation_of(node) if lakehistory._is_history_node(node) else '' -%}
      {%- for source_id in lakehistory._upstream_through_ephemerals(node) -%}
        {%- set source = graph.sources.get(source_id) -%}
        {%- set root = source and ((source.meta or {}).get('lakehistory', {}).get('landing_root')
                                   or (source.source_meta or {}).get('lakehistory', {}).get('landing_root')) -%}
        {%- if root and (source.meta or {}).get('lakehistory', {}).get('key') and [root, source.name, history] not in tables -%}
          {%- do tables.append([root, source.name, history]) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(tables) }}
{% endmacro %}


{#- Every landed table of the project that something applies, as [landing_root, table, kind]
    triples: 'batches' for the sources of history models, 'extract' for those of snapshots. A
    sync may name only these: a table no model reads would never apply its share of the sync. -#}
{% macro _project_landed_tables() %}
  {%- set tables = [] -%}
  {%- for node in graph.nodes.values() -%}
    {%- set kind = 'batches' if lakehistory._is_history_node(node) else ('extract' if node.resource_type == 'snapshot' else none) -%}
    {%- if kind -%}
      {%- for source_id in lakehistory._upstream_through_ephemerals(node) -%}
        {%- set source = graph.sources.get(source_id) -%}
        {%- set root = source and ((source.meta or {}).get('lakehistory', {}).get('landing_root')
                                   or (source.source_meta or {}).get('lakehistory', {}).get('landing_root')) -%}
        {%- if root and [root, source.name, kind] not in tables -%}
          {%- do tables.append([root, source.name, kind]) -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(tables) }}
{% endmacro %}


{#- What `node` reads: its parents, and the parents of every ephemeral model among them, however
    deep (an ephemeral model is compiled into its reader). -#}
{% macro _upstream_through_ephemerals(node) %}
  {%- set found = [] -%}
  {%- set walk = namespace(frontier=[node]) -%}
  {%- for _ in range(10) if walk.frontier -%}
    {%- set next = [] -%}
    {%- for current in walk.frontier -%}
      {%- for parent_id in (current.get('depends_on') or {}).get('nodes', []) -%}
        {%- if parent_id not in found -%}
          {%- do found.append(parent_id) -%}
          {%- set parent = graph.nodes.get(parent_id) -%}
          {%- if parent and parent.config.materialized == 'ephemeral' -%}
            {%- do next.append(parent) -%}
          {%- endif -%}
        {%- endif -%}
      {%- endfor -%}
    {%- endfor -%}
    {%- set walk.frontier = next -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- The relation of the history model a staging of source_name.table_name in `node` feeds: `node`
    itself, or the one history model that reads `node`, an ephemeral model, directly or through
    others; none when no history model reads it. dbt compiles an ephemeral model once per
    invocation, so one that two history models read would stage one set of batches for both:
    refused. -#}
{% macro _history_consumer(node, source_name, table_name) %}
  {%- if lakehistory._is_history_node(node) -%}
    {{ return(this) }}
  {%- endif -%}
  {#- the nodes that read `node`, and those that read an ephemeral one among them, level by level -#}
  {%- set readers = [] -%}
  {%- set walk = namespace(frontier=[node.unique_id]) -%}
  {%- for _ in range(10) if walk.frontier -%}
    {%- set next = [] -%}
    {%- for candidate in graph.nodes.values() -%}
      {%- if (candidate.get('depends_on') or {}).get('nodes', []) | select('in', walk.frontier) | list -%}
        {%- if lakehistory._is_history_node(candidate) -%}
          {%- do readers.append(candidate) -%}
        {%- elif candidate.config.materialized == 'ephemeral' -%}
          {%- do next.append(candidate.unique_id) -%}
        {%- endif -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set walk.frontier = next -%}
  {%- endfor -%}
  {%- if readers | length > 1 -%}
    {{ exceptions.raise_compiler_error(
        node.name ~ " stages the batches of " ~ source_name ~ "." ~ table_name ~ " for the history models "
        ~ (readers | map(attribute='name') | join(', ')) ~ ", but dbt compiles an ephemeral model once a run,"
        ~ " so they would share one set of pending batches, and each history table has its own: select from"
        ~ " lakehistory.landing_batches in each history model, or give each its own staging model.") }}
  {%- endif -%}
  {{ return(api.Relation.create(database=readers[0].database, schema=readers[0].schema, identifier=readers[0].alias) if readers else none) }}
{% endmacro %}


{% macro _is_history_node(node) %}
  {{ return(node.resource_type == 'model' and node.config.get('incremental_strategy') == 'fivetran_history') }}
{% endmacro %}


{#- A node's relation as the engine names it (the history merge's target, the transactions' history_table). -#}
{% macro _relation_of(node) %}
  {{ return(api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) | string) }}
{% endmacro %}


{#- Where a landed table's files are, its key and its typed columns, from its source entry. -#}
{% macro _landed_table(source_name, table_name) %}
  {%- set node = lakehistory._source_node(source_name, table_name) -%}
  {%- set source_meta = (node.source_meta or {}).get('lakehistory', {}) -%}
  {%- set table_meta = (node.meta or {}).get('lakehistory', {}) -%}
  {%- set landing_root = table_meta.get('landing_root') or source_meta.get('landing_root') -%}
  {%- set key = table_meta.get('key') -%}
  {%- if not landing_root or not key -%}
    {{ exceptions.raise_compiler_error(
        "Source " ~ source_name ~ "." ~ table_name ~ " needs meta.lakehistory.landing_root (on the source or the table)"
        ~ " and meta.lakehistory.key (on the table).") }}
  {%- endif -%}
  {%- set columns = [] -%}
  {%- for column in node.columns.values() -%}
    {%- if not column.data_type -%}
      {{ exceptions.raise_compiler_error("Source " ~ source_name ~ "." ~ table_name ~ ": column " ~ column.name ~ " needs a data_type.") }}
    {%- endif -%}
    {%- do columns.append([column.name, column.data_type]) -%}
  {%- endfor -%}
  {{ return({'landing_root': landing_root, 'key': key, 'columns': columns, 'not_null': lakehistory._not_null_columns(node)}) }}
{% endmacro %}


{#- The source's columns it declares NOT NULL: those with a `not_null` constraint in the
    source's YAML (`constraints: [{type: not_null}]`, dbt's column constraint; a data test could
    not run on a landed source, which is not a table). Every batch must keep the rule, and the
    history table declares them NOT NULL. -#}
{% macro _not_null_columns(source_node) %}
  {%- set names = [] -%}
  {%- for column in source_node.columns.values() -%}
    {%- for constraint in column.get('constraints') or [] -%}
      {%- if (constraint.get('type') | string | lower) in ('not_null', 'constrainttype.not_null') and column.name not in names -%}
        {%- do names.append(column.name) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{% macro _source_node(source_name, table_name) %}
  {%- for node in graph.sources.values() -%}
    {%- if node.source_name == source_name and node.name == table_name -%}
      {{ return(node) }}
    {%- endif -%}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("No source " ~ source_name ~ "." ~ table_name ~ " in the project.") }}
{% endmacro %}
