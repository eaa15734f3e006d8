{#-
  The period of a relation's rows, so that as_of, current and the SQL:2011 forms (as_of.sql) read
  any history, not only history tables. A row is valid from `valid_from` (inclusive) to
  `valid_to` (exclusive); an open row's valid_to is NULL or a fixed "end of time" value: the
  period's `open_end` (SQL of valid_to's type, e.g. 2147483647 as Atoti writes it, or
  "timestamp'2099-12-31 23:59:59'"), else NULL.

  Where the period comes from, first match wins:
    1. the `period` argument of as_of, current, history or current_version: {'valid_from': ...,
       'valid_to': ..., 'open_end': ...};
    2. the relation's config, `meta: {lakehistory: {period: {valid_from: ..., valid_to: ...}}}`
       on a model, seed or snapshot (the same keys);
    3. what the relation is:
         a history table (fivetran_history)  valid_from / valid_to, the project's open end
         a dbt snapshot                      dbt_valid_from / dbt_valid_to (or the names in
                                             snapshot_meta_column_names), open end NULL or the
                                             snapshot's dbt_valid_to_current; deletion records
                                             (hard_deletes: new_record) end a key's period
         an `_hx` table (meta.lakehistory.hx)  valid from mod_time until the key's next row;
                                             deletion rows end the period
         any other table (a source, a seed)  by its columns: valid_from (read as a history
                                             table) or dbt_valid_from / dbt_valid_to (a snapshot)
  Without valid_to, a row is valid until the next row of the same `key` (ordered by valid_from,
  then `order`), or for ever without a key (Atoti's append-only tables). `removed` names a
  boolean column of rows that only end the key's previous row (they are never returned).
-#}
{% macro period_of(relation, period=none) %}
  {{ return(adapter.dispatch('period_of', 'lakehistory')(relation, period)) }}
{% endmacro %}

{% macro default__period_of(relation, period=none) %}
  {%- if not execute -%}
    {{ return({'kind': 'history', 'rows': relation}) }}
  {%- endif -%}
  {%- if period -%}
    {{ return(lakehistory._period_from_config(relation, period, 'argument')) }}
  {%- endif -%}
  {%- set node = lakehistory._relation_node(relation) -%}
  {%- set meta = ((node.config.meta or {}).get('lakehistory') or {}) if node else {} -%}
  {%- if meta.get('period') -%}
    {{ return(lakehistory._period_from_config(relation, meta.period, 'config')) }}
  {%- elif node and node.resource_type == 'model' and node.config.get('incremental_strategy') == 'fivetran_history' -%}
    {{ return({'kind': 'history', 'rows': relation}) }}
  {%- elif node and node.resource_type == 'snapshot' -%}
    {%- set names = node.config.get('snapshot_meta_column_names') or {} -%}
    {{ return(lakehistory._snapshot_period(relation, names, node.config.get('hard_deletes') == 'new_record',
        node.config.get('dbt_valid_to_current'))) }}
  {%- elif meta.get('hx') -%}
    {{ return(lakehistory._period_from_config(relation, {'valid_from': 'mod_time', 'key': meta.hx.key,
        'order': [meta.hx.table ~ '_hx_id'], 'removed': 'deleted'}, 'hx')) }}
  {%- else -%}
    {#- any other table (a source, a seed, another project's table): known by its columns -#}
    {%- set columns = adapter.get_columns_in_relation(relation) | map(attribute='name') | map('lower') | list -%}
    {%- if 'valid_from' in columns or not columns -%}
      {#- (no columns: not built yet, as at `dbt compile` on a new lakehouse; the SQL reads valid_from/valid_to) -#}
      {{ return({'kind': 'history', 'rows': relation}) }}
    {%- elif 'dbt_valid_from' in columns and 'dbt_valid_to' in columns -%}
      {{ return(lakehistory._snapshot_period(relation, {}, 'dbt_is_deleted' in columns, none)) }}
    {%- endif -%}
  {%- endif -%}
  {{ exceptions.raise_compiler_error(relation ~ ": no period known - pass period={'valid_from': ..., 'valid_to': ...}"
      ~ " (or valid_from and key), or set meta.lakehistory.period in its config; history tables, dbt snapshots and"
      ~ " _hx tables need neither") }}
{% endmacro %}


{#- The period a config (or the arguments) names. `to` is a column, or the next row's valid_from
    (a column `valid_to` the subquery adds), or none (valid for ever). -#}
{% macro _period_from_config(relation, config, kind) %}
  {%- set unknown = config.keys() | reject('in', ['valid_from', 'valid_to', 'open_end', 'key', 'order', 'removed']) | list -%}
  {%- if unknown or not config.get('valid_from') or (config.get('open_end') is not none and not config.get('valid_to')) -%}
    {{ exceptions.raise_compiler_error(relation ~ ": a period needs valid_from, and takes valid_to (with its open_end),"
        ~ " key, order and removed; got " ~ (config.keys() | list)) }}
  {%- endif -%}
  {%- set open = config.get('open_end') -%}
  {%- set open = none if open is none or (open | string | lower) == 'null' else (open | string) -%}
  {%- set start = adapter.quote(config.valid_from) -%}
  {%- set key = lakehistory._as_list(config.get('key')) -%}
  {%- set removed = config.get('removed') -%}
  {%- set rows, hide = relation, [] -%}
  {%- if config.get('valid_to') -%}
    {%- set end = adapter.quote(config.valid_to) -%}
  {%- elif key -%}
    {%- set order = [config.valid_from] + lakehistory._as_list(config.get('order')) -%}
    {%- set end, hide = '`valid_to`', ['valid_to'] -%}
    {%- set rows = '(select *, lead(' ~ start ~ ') over (partition by ' ~ lakehistory._columns(key, none)
        ~ ' order by ' ~ lakehistory._columns(order, none) ~ ') as `valid_to` from ' ~ relation ~ ')' -%}
  {%- else -%}
    {%- set end = none -%}
  {%- endif -%}
  {%- if removed -%}
    {%- set rows = '(select * from ' ~ rows ~ ' where not coalesce(' ~ adapter.quote(removed) ~ ', false))' -%}
  {%- endif -%}
  {{ return({'kind': kind, 'rows': rows, 'from': start, 'to': end, 'open': open, 'hide': hide}) }}
{% endmacro %}


{#- A dbt snapshot's period: its meta columns under their configured `names`; with deletion
    records (hard_deletes: new_record), those rows only end a key's period. -#}
{% macro _snapshot_period(relation, names, deletion_records, open_end) %}
  {%- set rows = relation -%}
  {%- if deletion_records -%}
    {%- set rows = '(select * from ' ~ relation ~ ' where not coalesce('
        ~ adapter.quote(names.get('dbt_is_deleted') or 'dbt_is_deleted') ~ " = 'True', false))" -%}
  {%- endif -%}
  {{ return({'kind': 'snapshot', 'rows': rows, 'from': adapter.quote(names.get('dbt_valid_from') or 'dbt_valid_from'),
      'to': adapter.quote(names.get('dbt_valid_to') or 'dbt_valid_to'), 'open': open_end, 'hide': []}) }}
{% endmacro %}


{#- The model, seed or snapshot of this project that `relation` is, if any. -#}
{% macro _relation_node(relation) %}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type in ('model', 'seed', 'snapshot') and (node.alias or node.name) == relation.identifier
        and node.schema == relation.schema -%}
      {{ return(node) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}


{#- Predicates over a period `p`: its row is still valid after `x` (valid_to > x, or >= x when not
    strict), it ended by `x`, it is open. An open end is NULL (open: none) or p.open. -#}
{% macro _period_ends_after(p, x, strict=true) %}
  {%- if p.to is none -%}{{ return('true') }}{%- endif -%}
  {%- set test = p.to ~ (' > (' if strict else ' >= (') ~ x ~ ')' -%}
  {{ return(test if p.open else '(' ~ p.to ~ ' is null or ' ~ test ~ ')') }}
{% endmacro %}

{% macro _period_ended_by(p, x) %}
  {%- if p.to is none -%}{{ return('false') }}{%- endif -%}
  {{ return(p.to ~ ' <= (' ~ x ~ ')' ~ ((' and ' ~ p.to ~ ' != (' ~ p.open ~ ')') if p.open else '')) }}
{% endmacro %}

{% macro _period_is_open(p) %}
  {%- if p.to is none -%}{{ return('true') }}{%- endif -%}
  {{ return(p.to ~ ' = (' ~ p.open ~ ')' if p.open else p.to ~ ' is null') }}
{% endmacro %}
