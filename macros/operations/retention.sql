{#-
  Retention for the models built on history tables (lakehistory.cleanup without `model`, or with
  one of them). Each keeps every answer at or after the cutoff transaction c, and each removal is
  one Delta MERGE ... DELETE, a transaction of the writer recorded as a cleanup of that table
  (app_id lakehistory.retention), which a later tag or revert of a transaction before c sees:

    event history   a key's events up to c except its last one (by transaction, then valid time;
                    both rows of an update): replayed to any transaction from c on, what is left
                    gives the same table
    feature states  a key's states up to c except its last one, which the next state's version
                    and puuid continue from
    _hx table       a row that a row of the same key and mod_time with a larger id, recorded by c,
                    supersedes (a correction or a withdrawal): from c on it is no reading's row.
                    A row a history foreign key of a child `_hx` table points at stays, so every
                    history foreign key still finds its parent row; children are cleaned first

  Each also keeps what a tag (lakehistory.tag) before c reads: a key's last event or state up to
  the tagged transaction, and the `_hx` rows current then.

  A model that another reads incrementally (a history table's events, states and `_hx` tables; an
  `_hx` table's children; an event history's core_history) keeps what the reader has not recorded
  yet: its cutoff stops at the reader's last recorded transaction.
-#}

{#- What a node is for retention: 'events', 'states', 'hx', 'core' (core_history) or none. -#}
{% macro _derived_kind(node) %}
  {%- set macros = node.depends_on.macros -%}
  {%- if node.resource_type != 'model' -%}{{ return(none) }}{%- endif -%}
  {%- if ((node.config.meta or {}).get('lakehistory') or {}).get('hx') -%}{{ return('hx') }}{%- endif -%}
  {%- if 'macro.lakehistory.event_history' in macros -%}{{ return('events') }}{%- endif -%}
  {%- if 'macro.lakehistory.feature_states' in macros -%}{{ return('states') }}{%- endif -%}
  {%- if 'macro.lakehistory.core_history' in macros -%}{{ return('core') }}{%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- The event histories, feature states and `_hx` models, in the order retention takes them:
    an `_hx` table after every child that points at it. -#}
{% macro _derived_nodes() %}
  {%- set nodes = [] -%}
  {%- set hx = [] -%}
  {%- if not execute -%}{{ return(nodes) }}{%- endif -%}
  {%- for node in graph.nodes.values() | sort(attribute='name') -%}
    {%- set kind = lakehistory._derived_kind(node) -%}
    {%- if kind in ('events', 'states') -%}{%- do nodes.append(node) -%}{%- endif -%}
    {%- if kind == 'hx' -%}{%- do hx.append(node) -%}{%- endif -%}
  {%- endfor -%}
  {#- children first: each pass takes the `_hx` models no model still waiting points at -#}
  {%- for _ in hx -%}
    {%- for node in hx if node not in nodes -%}
      {%- set waiting = namespace(any=false) -%}
      {%- for child in hx if child not in nodes and child is not sameas node -%}
        {%- if node.unique_id in child.depends_on.nodes -%}{%- set waiting.any = true -%}{%- endif -%}
      {%- endfor -%}
      {%- if not waiting.any -%}{%- do nodes.append(node) -%}{%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(nodes) }}
{% endmacro %}


{#- The relation of a model node, none while it has not been built. -#}
{% macro _built_relation(node) %}
  {{ return(adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias or node.name)) }}
{% endmacro %}


{#- The transaction up to which `reader` has recorded what it reads from `node`, at most
    `cutoff`: the cleanup of `node` stops there. A reader is behind when a transaction it takes
    (of its history table or snapshot) lies after the last one it recorded. -#}
{% macro _recorded_through(reader, node, cutoff) %}
  {%- set relation = lakehistory._built_relation(reader) -%}
  {%- if relation is none -%}{{ return(0) }}{%- endif -%}
  {%- set kind = lakehistory._derived_kind(reader) -%}
  {%- if kind == 'core' -%}
    {#- a transaction belongs to one history table: an events transaction core_history lacks is pending for it -#}
    {%- set missing = run_query("select min(e.`_hist_trans_id`) from " ~ lakehistory._built_relation(node) ~ " as e"
        ~ " left anti join " ~ relation ~ " as c on e.`_hist_trans_id` = c.`trans_id`"
        ~ " where e.`_hist_trans_id` <= " ~ (cutoff | int)).rows[0][0] -%}
    {{ return(cutoff if missing is none else missing | int - 1) }}
  {%- endif -%}
  {%- set source_name = reader.config.meta.lakehistory.hx.source if kind == 'hx' else none -%}
  {%- set source = namespace(name=none) -%}
  {%- for n in graph.nodes.values() if n.resource_type in ('model', 'snapshot') and (n.name == source_name
        or (source_name is none and n.unique_id in reader.depends_on.nodes and n.config.get('incremental_strategy') == 'fivetran_history')) -%}
    {%- set source.name = (n.schema ~ '.' ~ (n.alias or n.name)) | lower -%}
  {%- endfor -%}
  {%- set operations = {'events': "'batch', 'revert'", 'states': "'batch', 'revert', 'cleanup'", 'hx': "'batch', 'revert', 'snapshot'"}[kind] -%}
  {%- set column = '_hist_trans_id' if kind == 'events' else 'txn_id' -%}
  {%- set row = run_query("select r.`last`, (select min(`txn_id`) from " ~ lakehistory.transactions_relation()
      ~ " where lower(`history_table`) = " ~ lakehistory._text(source.name) ~ " and `operation` in (" ~ operations ~ ")"
      ~ " and `txn_id` > r.`last` and `txn_id` <= " ~ (cutoff | int) ~ ") from (select coalesce(max("
      ~ adapter.quote(column) ~ "), 0) as `last` from " ~ relation ~ ") as r").rows[0] -%}
  {{ return(cutoff if row[1] is none else row[0] | int) }}
{% endmacro %}


{#- `cutoff`, or the earlier transaction a model reading `node` has recorded up to (logged). -#}
{% macro _cleanup_horizon(node, cutoff) %}
  {%- set horizon = namespace(txn=cutoff, held_by=none) -%}
  {%- for reader in graph.nodes.values() if node.unique_id in (reader.depends_on or {}).get('nodes', [])
        and lakehistory._derived_kind(reader) is not none -%}
    {%- set recorded = lakehistory._recorded_through(reader, node, cutoff) -%}
    {%- if recorded < horizon.txn -%}
      {%- set horizon.txn = recorded -%}
      {%- set horizon.held_by = reader.name -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if horizon.held_by is not none -%}
    {{ log("cleanup: " ~ node.name ~ " is cleaned up to transaction " ~ horizon.txn ~ ", not " ~ cutoff ~ ": "
        ~ horizon.held_by ~ " has not recorded the transactions after it (build it, then clean up again)", info=true) }}
  {%- endif -%}
  {{ return(horizon.txn) }}
{% endmacro %}


{#- One event history, feature states or `_hx` model; returns the number of rows removed. -#}
{% macro _cleanup_derived(node, cutoff) %}
  {%- set target = lakehistory._built_relation(node) -%}
  {%- if target is none -%}
    {{ log("cleanup: " ~ node.name ~ " is not built; nothing to do", info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {%- set c = lakehistory._cleanup_horizon(node, cutoff) -%}
  {%- set kind = lakehistory._derived_kind(node) -%}
  {%- if kind == 'hx' -%}
    {%- set sql = lakehistory._hx_retention_sql(node, target, c) -%}
    {%- set what = 'superseded row(s) of ' ~ node.name ~ ' recorded at or before transaction ' ~ c -%}
  {%- else -%}
    {#- a history table, or a snapshot of extracts read as one -#}
    {%- set found = namespace(keys=none) -%}
    {%- for parent_id in node.depends_on.nodes if found.keys is none -%}
      {%- set parent = graph.nodes.get(parent_id) -%}
      {%- if parent and parent.resource_type in ('model', 'snapshot') -%}
        {%- set relation = api.Relation.create(database=parent.database, schema=parent.schema, identifier=parent.alias) -%}
        {%- if lakehistory._is_history_node(parent) or lakehistory._extract_snapshot_node(relation) is not none -%}
          {%- set found.keys = lakehistory.history_keys(relation) -%}
        {%- endif -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if found.keys is none -%}
      {{ exceptions.raise_compiler_error("cleanup: " ~ node.name ~ " reads no history table of this project") }}
    {%- endif -%}
    {%- set keys = found.keys -%}
    {%- set sql = lakehistory._log_retention_sql(kind, target, keys, c) -%}
    {%- set what = 'row(s) of ' ~ node.name ~ ' before its last entry per key at or before transaction ' ~ c -%}
  {%- endif -%}
  {#- The rows leave as a transaction of the writer, recorded (operation 'cleanup', app
      lakehistory.retention): a tag or a revert of a transaction before the cutoff sees it. -#}
  {%- set removed = run_query("select count(*) from " ~ target ~ " as t left semi join (" ~ sql['using'] ~ ") as d on "
      ~ sql['on']).rows[0][0] | int -%}
  {%- if removed == 0 -%}
    {{ log("cleanup: removed no " ~ what, info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {%- set remove = "merge into " ~ target ~ " as t using (" ~ sql['using'] ~ ") as d on " ~ sql['on'] ~ " when matched then delete" -%}
  {%- set row = lakehistory._cleanup_row(target, 'lakehistory.retention', removed ~ ' ' ~ what ~ ' removed', removed) -%}
  {%- set txn_id = lakehistory.run_transaction(lakehistory.ensure_transactions_table(), [remove], row, target) -%}
  {{ log("cleanup: removed " ~ removed ~ " " ~ what ~ " (transaction " ~ txn_id ~ ")", info=true) }}
  {{ return(removed) }}
{% endmacro %}


{#- Event history or feature states: every entry of a key up to `c` but its last, and but its
    last up to each tagged transaction before `c` (lakehistory.tag), which replays to the tag.
    Returns the removal's source (`using`, alias d) and its condition on the table (`on`, alias t). -#}
{% macro _log_retention_sql(kind, target, keys, c) %}
  {%- set txn = '`_hist_trans_id`' if kind == 'events' else '`txn_id`' -%}
  {%- set position = {} -%}
  {%- for alias in ('s', 't', 'k') -%}
    {#- events in replay order: transaction, then valid time, no valid time last -#}
    {%- do position.update({alias: "struct(" ~ alias ~ ".`_hist_trans_id`, coalesce(" ~ alias ~ ".`_hist_valid_time`, " ~ lakehistory._names()['end_of_time']['timestamp'] ~ "))" if kind == 'events' else alias ~ ".`version`"}) -%}
  {%- endfor -%}
  {%- set tags = lakehistory._engine('ensure_tags_table') -%}
  {%- set using -%}
        -- distinct: an update's two events share their position
        select distinct {{ lakehistory._columns(keys, 'k') }}, {{ position.k }} as `_lh_position`
        from {{ target }} as k
        inner join (
            select {{ lakehistory._columns(keys, 's') }}, max({{ position.s }}) as `_lh_last`
            from {{ target }} as s
            where s.{{ txn }} <= {{ c | int }}
            group by {{ lakehistory._columns(keys, 's') }}
        ) as l on {{ lakehistory._join_on('k', 'l', keys) }} and {{ position.k }} < l.`_lh_last`
        left anti join (
            select {{ lakehistory._columns(keys, 's') }}, max({{ position.s }}) as `_lh_kept`
            from {{ target }} as s
            inner join {{ tags }} as g on s.{{ txn }} <= g.`txn_id` and g.`txn_id` < {{ c | int }}
            group by {{ lakehistory._columns(keys, 's') }}, g.`txn_id`
        ) as g on {{ lakehistory._join_on('k', 'g', keys) }} and {{ position.k }} = g.`_lh_kept`
        where k.{{ txn }} <= {{ c | int }}
  {%- endset -%}
  {{ return({'using': using, 'on': lakehistory._join_on('t', 'd', keys) ~ ' and t.' ~ txn ~ ' <= ' ~ (c | int)
      ~ ' and ' ~ position.t ~ ' = d.`_lh_position`'}) }}
{% endmacro %}


{#- `_hx`: the rows a later row of the same key and mod_time, recorded by `c`, supersedes, but
    none a child's history foreign key points at, and none a tagged transaction before `c` reads
    (`using` and `on`, as for the event history). -#}
{% macro _hx_retention_sql(node, target, c) %}
  {%- set hx = node.config.meta.lakehistory.hx -%}
  {%- set tags = lakehistory._engine('ensure_tags_table') -%}
  {%- set id = adapter.quote(hx.table ~ '_hx_id') -%}
  {%- set references = [] -%}
  {%- for child in graph.nodes.values() if node.unique_id in (child.depends_on or {}).get('nodes', []) and lakehistory._derived_kind(child) == 'hx' -%}
    {%- set relation = lakehistory._built_relation(child) -%}
    {%- if relation is not none -%}
      {%- do references.append('select ' ~ id ~ ' as `_lh_ref` from ' ~ relation ~ ' where ' ~ id ~ ' is not null') -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set using -%}
        select h.{{ id }}
        from {{ target }} as h
        inner join (
            select {{ lakehistory._columns(hx.key, none) }}, `mod_time`, max({{ id }}) as `_lh_top`
            from {{ target }}
            where `txn_id` <= {{ c | int }}
            group by {{ lakehistory._columns(hx.key, none) }}, `mod_time`
        ) as s
            on {{ lakehistory._join_on('h', 's', hx.key) }} and h.`mod_time` = s.`mod_time` and h.{{ id }} < s.`_lh_top`
        {%- if references %}
        left anti join ({{ references | join(' union all ') }}) as r on h.{{ id }} = r.`_lh_ref`
        {%- endif %}
        left anti join (
            -- the rows a tagged transaction before c reads: each key and mod_time's top row then
            select max(k.{{ id }}) as `_lh_kept`
            from {{ target }} as k
            inner join {{ tags }} as g on k.`txn_id` <= g.`txn_id` and g.`txn_id` < {{ c | int }}
            group by {{ lakehistory._columns(hx.key, 'k') }}, k.`mod_time`, g.`txn_id`
        ) as g on h.{{ id }} = g.`_lh_kept`
        where h.`txn_id` <= {{ c | int }}
  {%- endset -%}
  {{ return({'using': using, 'on': 't.' ~ id ~ ' = d.' ~ id}) }}
{% endmacro %}
