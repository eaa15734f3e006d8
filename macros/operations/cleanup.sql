{#-
  Cleanup, as a run-operation: remove what no answer at or after a cutoff needs, from every table
  of the project or from one.

      dbt run-operation lakehistory.cleanup --args '{before_version: 40}'
      dbt run-operation lakehistory.cleanup --args '{model: meta_station_history, before_version: 40}'
      dbt run-operation lakehistory.cleanup --args '{before: "2024-06-01 00:00:00"}'

  The cutoff is a version (a transaction id, or with timestamp versions a transaction's start),
  or `before`, an instant: the version current then. Without `model`, every history table is
  cleaned, then every event history, feature states and `_hx` model (retention.sql). A history
  table loses the rows with `valid_to <= cutoff`: they belong to no state as of the cutoff or
  later, and a current row (open valid_to) is never touched. Nor is a version a tag needs (one
  current as of a tagged transaction: lakehistory.tag), and the log names each tag that kept some.

  A history table's rows leave it in one Delta commit (a DELETE, with deletion vectors), recorded
  as a transaction (operation = 'cleanup'). The models built on it read the rows a transaction
  opened and closed, so a history table keeps every row a transaction that one of them has not
  recorded yet still needs: its cutoff stops at the oldest of their last recorded transactions,
  and the log says so. Delta keeps the files of older table versions until its own VACUUM; run
  `REORG TABLE ... APPLY (PURGE)` and `VACUUM` afterwards to reclaim the space. Emulated time
  travel does not depend on those files.
-#}
{% macro cleanup(model=none, before_version=none, before=none) %}
  {{ return(adapter.dispatch('cleanup', 'lakehistory')(model, before_version, before)) }}
{% endmacro %}

{% macro default__cleanup(model=none, before_version=none, before=none) %}
  {%- if (before_version is none) == (before is none) -%}
    {{ exceptions.raise_compiler_error("cleanup: give exactly one of before_version (a version) or before (a timestamp)") }}
  {%- endif -%}
  {%- set cutoff = lakehistory._cleanup_cutoff(before_version, before) -%}
  {%- set removed = namespace(rows=0) -%}
  {%- if model is none -%}
    {%- for node in lakehistory.history_nodes() -%}
      {%- set removed.rows = removed.rows + lakehistory._cleanup_history(node, cutoff) -%}
    {%- endfor -%}
    {%- for node in lakehistory._derived_nodes() -%}
      {%- set removed.rows = removed.rows + lakehistory._cleanup_derived(node, cutoff) -%}
    {%- endfor -%}
    {{ return(removed.rows) }}
  {%- endif -%}
  {%- set history = lakehistory.history_nodes() | selectattr('name', 'equalto', model) | first -%}
  {%- if history is defined and history is not none -%}
    {{ return(lakehistory._cleanup_history(history, cutoff)) }}
  {%- endif -%}
  {%- for node in lakehistory._derived_nodes() if node.name == model -%}
    {{ return(lakehistory._cleanup_derived(node, cutoff)) }}
  {%- endfor -%}
  {{ exceptions.raise_compiler_error("cleanup: " ~ model ~ " is not a history table (incremental_strategy='fivetran_history'), an event history, feature states or an _hx model of this project") }}
{% endmacro %}


{#- The cutoff as a transaction id: the last transaction at or before the version (or instant) asked for. -#}
{% macro _cleanup_cutoff(before_version, before) %}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- if before is not none -%}
    {%- set instant = modules.datetime.datetime.fromisoformat(before | string).isoformat(sep=' ') -%}
    {%- set where = "`committed_at` <= timestamp'" ~ instant ~ "'" -%}
  {%- elif lakehistory.version_type() == 'integer' -%}
    {%- set last = run_query("select coalesce(max(`txn_id`), 0) from " ~ transactions).rows[0][0] | int -%}
    {%- if before_version | int > last -%}
      {{ exceptions.raise_compiler_error("cleanup: version " ~ before_version ~ " is after the last transaction " ~ last) }}
    {%- endif -%}
    {{ return(before_version | int) }}
  {%- else -%}
    {%- set instant = modules.datetime.datetime.fromisoformat(before_version | string).isoformat(sep=' ') -%}
    {%- set where = "`started_at` <= timestamp'" ~ instant ~ "'" -%}
  {%- endif -%}
  {{ return(run_query("select coalesce(max(`txn_id`), 0) from " ~ transactions ~ " where " ~ where).rows[0][0] | int) }}
{% endmacro %}


{#- A transaction's version as SQL: its id, or with timestamp versions its start. -#}
{% macro _version_of_txn(txn_id) %}
  {%- if lakehistory.version_type() == 'integer' -%}{{ return(txn_id | int) }}{%- endif -%}
  {%- set text = run_query("select date_format(`started_at`, 'yyyy-MM-dd HH:mm:ss.SSSSSS') from "
      ~ lakehistory.transactions_relation() ~ " where `txn_id` = " ~ (txn_id | int)).rows[0][0] -%}
  {{ return("timestamp'" ~ text ~ "'") }}
{% endmacro %}


{#- One history table: its versions closed at or before transaction `cutoff`, or before the
    oldest transaction a model built on it still has to record. -#}
{% macro _cleanup_history(node, cutoff) %}
  {%- set model = node.name -%}
  {%- set target = lakehistory._built_relation(node) -%}
  {%- if target is none -%}
    {{ log("cleanup: " ~ model ~ " is not built; nothing to do", info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- set horizon = lakehistory._cleanup_horizon(node, cutoff) -%}
  {%- if horizon == 0 -%}
    {{ log("cleanup: " ~ model ~ " holds no version closed at or before transaction 0; nothing to do", info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {%- set version = lakehistory._version_of_txn(horizon) -%}
  {#- The versions no answer at or after the cutoff needs (an append-only table: superseded rows),
      but those a tag needs. The tags are read in the removing statement itself, which runs under
      the writer lock a tag is made under, so a tag made meanwhile keeps its rows. Delta's DELETE
      takes no subquery: the rows leave by a MERGE. -#}
  {%- set tags = lakehistory._engine('ensure_tags_table') -%}
  {%- set tagged_version = '`txn_id`' if lakehistory.version_type() == 'integer' else '`started_at`' -%}
  {%- set versions = lakehistory.history_keys(target) + ['_fivetran_start'] -%}
  {%- if lakehistory.append_only() -%}
    {%- set closed, until = "(select *, lead(`valid_from`) over (partition by " ~ lakehistory._columns(versions, none)
        ~ " order by `valid_from`) as `_lh_next` from " ~ target ~ ")", '`_lh_next`' -%}
  {%- else -%}
    {%- set closed, until = target, '`valid_to`' -%}
  {%- endif -%}
  {%- set doomed -%}
    select h.* from {{ closed }} as h
    left anti join {{ tags }} as g on g.{{ tagged_version }} >= h.`valid_from` and g.{{ tagged_version }} < h.{{ until }}
    where h.{{ until }} <= {{ version }}
  {%- endset -%}
  {%- do lakehistory._log_tags_kept(model, target, tags, tagged_version, version, horizon) -%}
  {%- set purged = run_query("select count(*) from (" ~ doomed ~ ")").rows[0][0] | int -%}
  {%- if purged == 0 -%}
    {{ log("cleanup: " ~ model ~ " holds no version closed at or before transaction " ~ horizon ~ "; nothing to do", info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {#- The keys whose versions go, for the feature states' PURGE (feature_states.sql). Written
      first and replaced on a retry, which reuses the id: a cleanup that fails later leaves rows
      under an id no cleanup transaction has, and they are never read. -#}
  {%- set keys = lakehistory.history_keys(target) -%}
  {%- set purged_keys = lakehistory.purged_keys_relation(target) -%}
  {%- do lakehistory._engine('ensure_table', {'relation': purged_keys | string, 'statement':
      "create table if not exists " ~ purged_keys ~ " using delta as select cast(null as bigint) as `txn_id`, "
        ~ lakehistory._columns(keys, none) ~ " from " ~ target ~ " where false"}) -%}
  {%- set statements = [
      "delete from " ~ purged_keys ~ " where `txn_id` = system.session.lakehistory_txn_id",
      "insert into " ~ purged_keys ~ " select distinct system.session.lakehistory_txn_id, " ~ lakehistory._columns(keys, none)
        ~ " from (" ~ doomed ~ ")",
  ] -%}
  {%- set remove -%}
    merge into {{ target }} as t
    using ({{ doomed }}) as d
    on {{ lakehistory._join_on('t', 'd', versions) }} and t.`valid_from` = d.`valid_from`
    when matched then delete
  {%- endset -%}
  {%- do statements.append(remove) -%}
  {%- set row = lakehistory._cleanup_row(target, 'lakehistory.cleanup', 'versions closed at or before transaction ' ~ horizon ~ ' removed', purged) -%}
  {%- set txn_id = lakehistory.run_transaction(transactions, statements, row, target) -%}
  {{ log("cleanup: removed " ~ purged ~ " version(s) of " ~ model ~ " closed at or before transaction " ~ horizon ~ " (transaction " ~ txn_id ~ ")", info=true) }}
  {{ return(purged) }}
{% endmacro %}


{#- Logs each tag that keeps versions of a history table a cleanup would otherwise remove (an
    append-only table's too are kept, but not counted here: its rows have no valid_to). -#}
{% macro _log_tags_kept(model, target, tags, tagged_version, version, horizon) %}
  {%- if lakehistory.append_only() -%}{{ return(none) }}{%- endif -%}
  {%- set kept = run_query("select g.`tag`, g.`txn_id`, count(*) from " ~ target ~ " as h inner join " ~ tags ~ " as g on g."
      ~ tagged_version ~ " >= h.`valid_from` and g." ~ tagged_version ~ " < h.`valid_to` where h.`valid_to` <= " ~ version
      ~ " group by g.`tag`, g.`txn_id` order by g.`txn_id`, g.`tag`") -%}
  {%- for row in kept.rows -%}
    {{ log("cleanup: tag " ~ row[0] ~ " (transaction " ~ row[1] ~ ") keeps " ~ row[2] ~ " version(s) of " ~ model
        ~ " closed at or before transaction " ~ horizon, info=true) }}
  {%- endfor -%}
{% endmacro %}


{#- The transactions table's row of a cleanup of `target` (run_transaction's `row`), in the
    layout's order: `purged` rows removed, by application `app_id`, with `message`. -#}
{% macro _cleanup_row(target, app_id, message, purged) %}
  {%- set row -%}
    select
        system.session.lakehistory_txn_id,
        {{ lakehistory.naksha_uuid('system.session.lakehistory_txn_id', 'system.session.lakehistory_started_at', 0) }},
        'cleanup',
        null,
        {{ lakehistory._text(target) }},
        null,
        null,
        current_user(),
        {{ lakehistory._text(app_id) }},
        {{ lakehistory._text(message) }},
        system.session.lakehistory_started_at,
        current_timestamp(),
        0,
        0,
        0,
        0,
        {{ purged | int }},
        system.session.lakehistory_delta_version,
        null,
        null,
        null
  {%- endset -%}
  {{ return(row) }}
{% endmacro %}
