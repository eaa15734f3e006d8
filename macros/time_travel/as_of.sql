{#-
  Time travel over history tables (any table with `valid_from` / `valid_to` in transaction ids).

  A row belongs to the state after transaction v when `valid_from <= v < valid_to`: valid_from is
  inclusive, valid_to exclusive, and a row still current holds the open end (MAX or NULL, see
  versioning.sql). Versions are transaction ids or times (var lakehistory_version_type). Every
  macro returns SQL (a parenthesised subquery or an expression) to put in a FROM clause or a
  filter; the version may be a literal or any SQL expression of the version type.

      select * from {{ lakehistory.as_of(ref('meta_station_history'), 12) }}
      select * from {{ lakehistory.as_of_time(ref('meta_station_history'), "timestamp'2024-05-01 00:00:00'") }}

  The same macros read any other history (a dbt snapshot, an `_hx` table, a period named by
  config or the `period` argument) by its one period: period.sql.

  A consistent cut of several tables is the same version for each of them:

      {% set v = lakehistory.version_at("timestamp'2024-05-01 00:00:00'") %}
      select ... from {{ lakehistory.as_of(ref('meta_network_history'), v) }} as n
      join {{ lakehistory.as_of(ref('meta_station_history'), v) }} as s on ...
-#}

{#- The rows of `relation` in the state after transaction `version`: a history table's without
    valid_from/valid_to; any other history's (period.sql) with its columns. -#}
{% macro as_of(relation, version, period=none) %}
  {{ return(adapter.dispatch('as_of', 'lakehistory')(relation, version, period)) }}
{% endmacro %}

{% macro default__as_of(relation, version, period=none) %}
  {%- set p = lakehistory.period_of(relation, period) -%}
  {%- if p.kind != 'history' -%}
    {{- return(lakehistory._period_select(p, p.from ~ ' <= (' ~ version ~ ') and ' ~ lakehistory._period_ends_after(p, version))) -}}
  {%- endif -%}
  {{- return("(select * except (`valid_from`, `valid_to`) from " ~ lakehistory.versioned(relation) ~ " where "
      ~ lakehistory.as_of_filter(version) ~ ")") -}}
{% endmacro %}


{#- The current rows of `relation`: a history table's (the Fivetran history-mode table) without
    valid_from/valid_to; any other history's open rows. -#}
{% macro current(relation, period=none) %}
  {{ return(adapter.dispatch('current', 'lakehistory')(relation, period)) }}
{% endmacro %}

{% macro default__current(relation, period=none) %}
  {%- set p = lakehistory.period_of(relation, period) -%}
  {%- if p.kind != 'history' -%}
    {{- return(lakehistory._period_select(p, lakehistory._period_is_open(p))) -}}
  {%- endif -%}
  {{- return("(select * except (`valid_from`, `valid_to`) from " ~ lakehistory.versioned(relation) ~ " where "
      ~ lakehistory.is_current() ~ ")") -}}
{% endmacro %}


{#- A period's rows that hold `condition`, without the columns the period added. -#}
{% macro _period_select(p, condition) %}
  {%- set columns = ('* except (' ~ lakehistory._columns(p.hide, none) ~ ')') if p.hide else '*' -%}
  {{- return('(select ' ~ columns ~ ' from ' ~ p.rows ~ ' where ' ~ condition ~ ')') -}}
{% endmacro %}


{#- The filter behind as_of, for a row alias: `valid_from <= v and v < valid_to`. With the default
    open end (MAX) both are plain range predicates, so Delta skips files by their statistics. -#}
{% macro as_of_filter(version, alias=none) %}
  {{ return(adapter.dispatch('as_of_filter', 'lakehistory')(version, alias)) }}
{% endmacro %}

{% macro default__as_of_filter(version, alias=none) %}
  {%- set p = (alias ~ '.') if alias else '' -%}
  {{- return(p ~ "`valid_from` <= (" ~ version ~ ") and (" ~ version ~ ") < " ~ lakehistory.valid_to_sql(alias)) -}}
{% endmacro %}


{#- valid_to as SQL, an open end read as the end of time (NULL open ends need the coalesce). -#}
{% macro valid_to_sql(alias=none) %}
  {{ return(adapter.dispatch('valid_to_sql', 'lakehistory')(alias)) }}
{% endmacro %}

{% macro default__valid_to_sql(alias=none) %}
  {%- set column = ((alias ~ '.') if alias else '') ~ '`valid_to`' -%}
  {%- if lakehistory.open_end() == 'null' or lakehistory.append_only() -%}
    {{- return('coalesce(' ~ column ~ ', ' ~ lakehistory.end_of_time() ~ ')') -}}
  {%- endif -%}
  {{- return(column) -}}
{% endmacro %}


{#- A history table with valid_from and valid_to. An append-only table (valid_from only, removal
    rows) gets its valid_to from the next version of the same (key, _fivetran_start) row; its
    removal rows then drop out. -#}
{% macro versioned(relation) %}
  {{ return(adapter.dispatch('versioned', 'lakehistory')(relation)) }}
{% endmacro %}

{% macro default__versioned(relation) %}
  {%- if execute and lakehistory._extract_snapshot_node(relation) is not none -%}
    {{- return(lakehistory._snapshot_as_history(relation)) -}}
  {%- endif -%}
  {%- if not lakehistory.append_only() or not execute -%}
    {{- return(relation) -}}
  {%- endif -%}
  {%- set keys = lakehistory.history_keys(relation) + ['_fivetran_start'] -%}
  {{- return(
      "(select * except (`removal`) from (select *, lead(`valid_from`) over (partition by "
      ~ lakehistory._columns(keys, none) ~ " order by `valid_from`) as `valid_to` from " ~ relation
      ~ ") where not `removal`)") -}}
{% endmacro %}


{#- The source key of a history table of this project, from its model's unique_key. -#}
{% macro history_keys(relation) %}
  {{ return(adapter.dispatch('history_keys', 'lakehistory')(relation)) }}
{% endmacro %}

{% macro default__history_keys(relation) %}
  {%- for node in lakehistory.history_nodes() -%}
    {%- if node.alias == relation.identifier and node.schema == relation.schema -%}
      {{- return(lakehistory._as_list(node.config.get('unique_key'))) -}}
    {%- endif -%}
  {%- endfor -%}
  {%- set snapshot = lakehistory._extract_snapshot_node(relation) -%}
  {%- if snapshot is not none -%}
    {{- return(lakehistory._as_list(snapshot.config.get('unique_key'))) -}}
  {%- endif -%}
  {{ exceptions.raise_compiler_error(relation ~ " is not a history table of this project (incremental_strategy='fivetran_history')"
      ~ " nor a snapshot of its daily extracts (meta.lakehistory.extract)") }}
{% endmacro %}


{#- The rows of `relation` as the project knew them at instant `at` (transaction time): the state
    after the last transaction committed at or before `at`. -#}
{% macro as_of_time(relation, at) %}
  {{ return(adapter.dispatch('as_of_time', 'lakehistory')(relation, at)) }}
{% endmacro %}

{% macro default__as_of_time(relation, at) %}
  {{- return(lakehistory.as_of(relation, lakehistory.version_at_sql(at))) -}}
{% endmacro %}


{#- SQL for the last transaction visible at instant `at` (none: now), 0 before the first one: the
    consistent cut of every table. A transaction is visible once each table it holds has recorded
    it: a batch of its own when its table records it, a sync (the batches and extracts a source
    delivered together, one transaction) when the last of its tables does. The cut is the last
    transaction before the first one not visible, so a reader at it sees every table at the same
    sync, never half of one: while a run applies a sync, after a run that failed, after a kill. -#}
{% macro version_at_sql(at=none) %}
  {{ return(adapter.dispatch('version_at_sql', 'lakehistory')(at)) }}
{% endmacro %}

{% macro default__version_at_sql(at=none) %}
  {%- set visible = lakehistory.visible_txn_sql(at) -%}
  {%- if lakehistory.version_type() == 'integer' -%}
    {{- return(visible) -}}
  {%- endif -%}
  {{- return("(select coalesce(max(`started_at`), timestamp'0001-01-01 00:00:00') from " ~ lakehistory.transactions_relation()
      ~ " where `txn_id` <= " ~ visible ~ ")") -}}
{% endmacro %}


{#- The id of the last transaction visible at `at` (none: now), as SQL (see version_at_sql). -#}
{% macro visible_txn_sql(at=none) %}
  {{ return(adapter.dispatch('visible_txn_sql', 'lakehistory')(at)) }}
{% endmacro %}

{% macro default__visible_txn_sql(at=none) %}
  {%- set known = 'true' if at is none else '`committed_at` <= (' ~ at ~ ')' -%}
  {#- A sync reserved later than `at` has an id above every transaction recorded by then: only
      those whose tables had not all recorded them by `at` can cut before the last one. -#}
  {{- return("(select least(coalesce(max(t.`txn_id`), 0), coalesce((select min(`txn_id`) - 1 from "
      ~ lakehistory.incomplete_syncs_sql(at) ~ "), " ~ lakehistory._names()['end_of_time']['integer'] ~ ")) from "
      ~ lakehistory.transactions_relation() ~ " as t where " ~ known ~ ")") -}}
{% endmacro %}


{#- The syncs not visible at `at` (none: now), as a subquery: `txn_id`, `sync_id`, `tables` (those
    it holds) and `applied` (those that had recorded it by then). A sync's tables are landed
    tables; a revert's or undo's (lakehistory.revert), which is reserved as a sync is, history
    tables. A sync given up by then (lakehistory.abandon_sync) is visible with what it has. -#}
{% macro incomplete_syncs_sql(at=none) %}
  {{ return(adapter.dispatch('incomplete_syncs_sql', 'lakehistory')(at)) }}
{% endmacro %}

{% macro default__incomplete_syncs_sql(at=none) %}
  {%- set known = 'true' if at is none else '`committed_at` <= (' ~ at ~ ')' -%}
  {%- set applied = "array_intersect(s.`tables`, coalesce(d.`recorded`, array()))" -%}
  {{- return("(select s.`txn_id`, s.`sync_id`, s.`tables`, " ~ applied ~ " as `applied` from "
      ~ lakehistory.syncs_relation() ~ " as s left join (select `txn_id`,"
      ~ " array_union(collect_set(`source_table`), collect_set(`history_table`)) as `recorded`,"
      ~ " max(`operation` = 'abandon') as `abandoned` from "
      ~ lakehistory.transactions_relation() ~ " where " ~ known ~ " group by `txn_id`) as d on d.`txn_id` = s.`txn_id`"
      ~ " where size(array_except(s.`tables`, " ~ applied ~ ")) > 0 and not coalesce(d.`abandoned`, false))") -}}
{% endmacro %}


{#- The same as version_at_sql, as a SQL literal, read when the macro runs (for one consistent cut
    of several tables). -#}
{% macro version_at(at=none, tag=none) %}
  {{ return(adapter.dispatch('version_at', 'lakehistory')(at, tag)) }}
{% endmacro %}

{% macro default__version_at(at=none, tag=none) %}
  {%- if not execute -%}{{ return(0) }}{%- endif -%}
  {%- set version = lakehistory.tagged(tag) if tag is not none else lakehistory.version_at_sql(at) -%}
  {%- if lakehistory.version_type() == 'integer' -%}
    {{- return(run_query("select " ~ version).rows[0][0] | int) -}}
  {%- endif -%}
  {%- set text = run_query("select date_format(" ~ version ~ ", 'yyyy-MM-dd HH:mm:ss.SSSSSS')").rows[0][0] -%}
  {{- return("timestamp'" ~ text ~ "'") -}}
{% endmacro %}


{#-
  SQL:2011's query forms over either clock, as a subquery with every column of `relation`.

      lakehistory.history(relation, 'as_of', a)
      lakehistory.history(relation, 'from_to', a, b)
      lakehistory.history(relation, 'between', a, b)
      lakehistory.history(relation, 'contained_in', a, b)
      lakehistory.history(relation, 'all')

  clock='transaction' (the default): the period is [valid_from, valid_to), half-open, in
  transaction ids; a and b are ids.
      as_of a            valid_from <= a and a < valid_to
      from_to a, b       valid_from < b and valid_to > a           (overlaps [a, b))
      between a, b       valid_from <= b and valid_to > a          (overlaps [a, b])
      contained_in a, b  valid_from >= a and valid_to <= b         (within [a, b]; never an open row)
      all                every row

  clock='valid': the period is [_fivetran_start, _fivetran_end], closed (spec rule 18), in
  timestamps; the rows are those known after transaction `version` (default: now).
      as_of a            _fivetran_start <= a and a <= _fivetran_end
      from_to a, b       _fivetran_start < b and _fivetran_end >= a  (overlaps [a, b))
      between a, b       _fivetran_start <= b and _fivetran_end >= a (overlaps [a, b])
      contained_in a, b  _fivetran_start >= a and _fivetran_end <= b
      all                every row

  Any other history (period.sql): its period with the transaction clock's formulas, an open end
  (NULL or its open-end value) read as still valid; no valid clock.
-#}
{% macro history(relation, form, a=none, b=none, clock='transaction', version=none, period=none) %}
  {{ return(adapter.dispatch('history', 'lakehistory')(relation, form, a, b, clock, version, period)) }}
{% endmacro %}

{% macro default__history(relation, form, a=none, b=none, clock='transaction', version=none, period=none) %}
  {%- set needs = {'as_of': 1, 'from_to': 2, 'between': 2, 'contained_in': 2, 'all': 0} -%}
  {%- if form not in needs -%}
    {{ exceptions.raise_compiler_error("history(): form must be one of " ~ (needs.keys() | list) ~ ", not " ~ form) }}
  {%- endif -%}
  {%- if (needs[form] >= 1 and a is none) or (needs[form] == 2 and b is none) -%}
    {{ exceptions.raise_compiler_error("history(): form " ~ form ~ " needs " ~ needs[form] ~ " bound(s)") }}
  {%- endif -%}
  {%- if clock not in ('transaction', 'valid') -%}
    {{ exceptions.raise_compiler_error("history(): clock must be 'transaction' or 'valid', not " ~ clock) }}
  {%- endif -%}
  {%- set p = lakehistory.period_of(relation, period) -%}
  {%- if p.kind != 'history' -%}
    {%- if clock == 'valid' or version is not none -%}
      {{ exceptions.raise_compiler_error("history(): " ~ relation ~ " has one period (" ~ p.kind ~ "); clock='valid'"
          ~ " and version are for history tables, whose rows have a valid time and a transaction time") }}
    {%- endif -%}
    {%- set known, rows, lo, lo_closed = 'true', p.rows, p.from, false -%}
  {%- elif clock == 'transaction' -%}
    {%- set known, rows, lo, lo_closed = 'true', lakehistory.versioned(relation), '`valid_from`', false -%}
    {%- set p = {'to': lakehistory.valid_to_sql(), 'open': lakehistory.end_of_time()} -%}
  {%- else -%}
    {%- set known = lakehistory.as_of_filter(version) if version is not none else lakehistory.is_current() -%}
    {%- set rows, lo, lo_closed = lakehistory.versioned(relation), '`_fivetran_start`', true -%}
    {%- set p = {'to': '`_fivetran_end`', 'open': lakehistory._names()['fivetran_end_of_time']} -%}
  {%- endif -%}
  {#- A half-open period ends after x when its end is > x; a closed one (the valid clock) when >= x. -#}
  {%- set strict = not lo_closed -%}
  {%- if form == 'as_of' -%}
    {%- set within = lo ~ ' <= (' ~ a ~ ') and ' ~ lakehistory._period_ends_after(p, a, strict) -%}
  {%- elif form == 'from_to' -%}
    {%- set within = lo ~ ' < (' ~ b ~ ') and ' ~ lakehistory._period_ends_after(p, a, strict) -%}
  {%- elif form == 'between' -%}
    {%- set within = lo ~ ' <= (' ~ b ~ ') and ' ~ lakehistory._period_ends_after(p, a, strict) -%}
  {%- elif form == 'contained_in' -%}
    {%- set within = lo ~ ' >= (' ~ a ~ ') and ' ~ lakehistory._period_ended_by(p, b) -%}
  {%- else -%}
    {%- set within = 'true' -%}
  {%- endif -%}
  {{- return("(select * from " ~ rows ~ " where (" ~ known ~ ") and (" ~ within ~ "))") -}}
{% endmacro %}
