{#-
  Cleanup, as a run-operation: remove the versions of a history table that no answer at or after a
  cutoff needs, and record the removal as a transaction (operation = 'cleanup').

      dbt run-operation lakehistory.cleanup --args '{model: meta_station_history, before_version: 40}'
      dbt run-operation lakehistory.cleanup --args '{model: meta_station_history, before: "2024-06-01 00:00:00"}'

  A row is removed when `valid_to <= cutoff`: it belongs to no state as of the cutoff or later, so
  every such answer stays the same, and a current row (open valid_to) is never touched. `before`
  is a timestamp (transaction time): the cutoff is the version current at that instant.

  The rows leave the table in one Delta commit (a DELETE, with deletion vectors). Delta keeps the
  files of older table versions until its own VACUUM; run `REORG TABLE ... APPLY (PURGE)` and
  `VACUUM` afterwards to reclaim the space. Emulated time travel does not depend on those files.
-#}
{% macro cleanup(model, before_version=none, before=none) %}
  {{ return(adapter.dispatch('cleanup', 'lakehistory')(model, before_version, before)) }}
{% endmacro %}

{% macro default__cleanup(model, before_version=none, before=none) %}
  {%- if (before_version is none) == (before is none) -%}
    {{ exceptions.raise_compiler_error("cleanup: give exactly one of before_version (a transaction id) or before (a timestamp)") }}
  {%- endif -%}
  {%- set node = lakehistory.history_nodes() | selectattr('name', 'equalto', model) | first -%}
  {%- if node is not defined or node is none -%}
    {{ exceptions.raise_compiler_error("cleanup: " ~ model ~ " is not a history table of this project (incremental_strategy='fivetran_history')") }}
  {%- endif -%}
  {%- set target = api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) -%}
  {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- set last = run_query("select coalesce(max(txn_id), 0) from " ~ transactions).rows[0][0] | int -%}
  {%- if before is not none -%}
    {%- set instant = modules.datetime.datetime.fromisoformat(before | string) -%}
    {%- set cutoff = lakehistory.version_at("timestamp'" ~ instant.isoformat(sep=' ') ~ "'") -%}
  {%- elif lakehistory.version_type() == 'integer' -%}
    {%- set cutoff = before_version | int -%}
    {%- if cutoff > last -%}
      {{ exceptions.raise_compiler_error("cleanup: version " ~ cutoff ~ " is after the last transaction " ~ last) }}
    {%- endif -%}
  {%- else -%}
    {%- set cutoff = "timestamp'" ~ modules.datetime.datetime.fromisoformat(before_version | string).isoformat(sep=' ') ~ "'" -%}
  {%- endif -%}
  {#- The versions no answer at or after the cutoff needs (an append-only table: superseded rows). -#}
  {%- if lakehistory.append_only() -%}
    {%- set versions = lakehistory.history_keys(target) + ['_fivetran_start'] -%}
    {%- set doomed -%}
      select {{ lakehistory._columns(versions, none) }}, `valid_from` from (
          select *, lead(`valid_from`) over (partition by {{ lakehistory._columns(versions, none) }} order by `valid_from`) as `_lh_next`
          from {{ target }}
      ) where `_lh_next` <= {{ cutoff }}
    {%- endset -%}
  {%- else -%}
    {%- set doomed = "select * from " ~ target ~ " where `valid_to` <= " ~ cutoff -%}
  {%- endif -%}
  {%- set purged = run_query("select count(*) from (" ~ doomed ~ ")").rows[0][0] | int -%}
  {%- if purged == 0 -%}
    {{ log("cleanup: " ~ model ~ " holds no version closed at or before transaction " ~ cutoff ~ "; nothing to do", info=true) }}
    {{ return(0) }}
  {%- endif -%}
  {#- The keys whose versions go, for the feature states' PURGE (feature_states.sql). Written
      first and replaced on a retry, which reuses the id: a cleanup that fails later leaves rows
      under an id no cleanup transaction has, and they are never read. -#}
  {%- set keys = lakehistory.history_keys(target) -%}
  {%- set purged_keys = lakehistory.purged_keys_relation(target) -%}
  {%- set statements = [
      "create table if not exists " ~ purged_keys ~ " using delta as select cast(null as bigint) as `txn_id`, "
        ~ lakehistory._columns(keys, none) ~ " from " ~ target ~ " where false",
      "delete from " ~ purged_keys ~ " where `txn_id` = system.session.lakehistory_txn_id",
      "insert into " ~ purged_keys ~ " select distinct system.session.lakehistory_txn_id, " ~ lakehistory._columns(keys, none)
        ~ " from (" ~ doomed ~ ")",
  ] -%}
  {%- set remove -%}
    {%- if lakehistory.append_only() %}
    merge into {{ target }} as t
    using ({{ doomed }}) as d
    on {{ lakehistory._join_on('t', 'd', versions) }} and t.`valid_from` = d.`valid_from`
    when matched then delete
    {%- else %}
    delete from {{ target }} where `valid_to` <= {{ cutoff }}
    {%- endif %}
  {%- endset -%}
  {%- do statements.append(remove) -%}
  {%- set record -%}
    insert into {{ transactions }} ({{ lakehistory.transaction_columns() }})
    select
        system.session.lakehistory_txn_id,
        {{ lakehistory.naksha_uuid('system.session.lakehistory_txn_id', 'system.session.lakehistory_started_at', 0) }},
        'cleanup',
        null,
        {{ lakehistory._text(target) }},
        null,
        null,
        current_user(),
        'lakehistory.cleanup',
        {{ lakehistory._text('versions closed at or before version ' ~ cutoff ~ ' removed') }},
        system.session.lakehistory_started_at,
        current_timestamp(),
        0,
        0,
        0,
        0,
        {{ purged }},
        system.session.lakehistory_delta_version
  {%- endset -%}
  {%- set txn_id = lakehistory.run_transaction(transactions, statements, record, target) -%}
  {{ log("cleanup: removed " ~ purged ~ " version(s) of " ~ model ~ " closed at or before transaction " ~ cutoff ~ " (transaction " ~ txn_id ~ ")", info=true) }}
  {{ return(purged) }}
{% endmacro %}
