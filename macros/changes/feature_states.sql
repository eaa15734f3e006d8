{#-
  Feature states (seed 002, Naksha): every state each row (feature) of a history table has had,
  as a version chain. The body of an incremental model:

      {{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}
      {{ lakehistory.feature_states(ref('meta_station_history')) }}

  One state per change of the table's current state (changes.sql), and one per key a cleanup
  removed versions of:

    action            CREATE (an insert, also the re-insert of a deleted key), UPDATE, DELETE, and
                      PURGE: a cleanup removed versions of the key, so its states before the
                      cleanup's cutoff can no longer be rebuilt with the time-travel macros
    version           the key's change counter: 1, 2, 3, ... (a re-insert continues it)
    uuid, puuid       this state's Naksha uuid and the previous state's (NULL on a CREATE, the
                      re-insert of a deleted key included: seed 002).
                      Object type 1 (feature), the transaction's date, the project's database id;
                      the object id is txn_id * 2^28 + the state's ordinal within its transaction
                      (by key), so uuids are unique across all tables of the project. The tables of
                      a sync share its transaction: each numbers its states in a slot of its own
                      (the high bits of the ordinal: its place among the sync's tables)
    txn, txn_id       the transaction's uuid and id
    author, app_id    from the transaction; with no author, an update, delete or purge keeps the
                      previous state's author and a new feature is authored by the app (seed 002)
    created_at        transaction time of the key's first state
    updated_at        transaction time of this state (the transaction's started_at)
    rtcts             real (wall-clock) time of the key's first state
    rtuts             real time of this state: when its transaction committed the history table
                      (the transactions table's committed_at). A sync's tables share updated_at,
                      each has its own rtuts
    valid_created_at  valid time of the key's first state (its first version's _fivetran_start)
    valid_updated_at  valid time of this state (changes.sql); a PURGE keeps the previous one
    deleted           true from a DELETE until the next CREATE
    xyz               the state as seed 002's XYZ namespace writes it, its names and types to the
                      letter: action, version, author, app_id, puuid, uuid, txn, and the four
                      times as unix epoch milliseconds (createdAt, updatedAt, rtcts, rtuts)

  The data columns hold the state's values: the new ones, a DELETE's last values, a PURGE the
  previous state's.
-#}

{% macro feature_states(history) %}
  {#- read while dbt parses the model: its table carries the history's NOT NULL columns -#}
  {%- do config(post_hook='{{ lakehistory._carry_not_null() }}') -%}
  {{ return(adapter.dispatch('feature_states', 'lakehistory')(history)) }}
{% endmacro %}

{% macro default__feature_states(history) %}
  {%- do lakehistory._refuse_full_refresh('a table of feature states') -%}
  {%- if not execute or load_relation(history) is none -%}
    {{ return(lakehistory._not_built_yet(history)) }}
  {%- endif -%}
  {%- set keys = lakehistory.history_keys(history) -%}
  {%- set columns = lakehistory._data_columns_without(history, 'states') -%}
  {%- do lakehistory._follow_history(history, 'states', columns, {'rtcts': 'timestamp', 'rtuts': 'timestamp', 'xyz': lakehistory._xyz_namespace_type()}) -%}
  {%- set operations = ['batch', 'edit', 'revert', 'snapshot', 'cleanup'] -%}
  {%- set last = lakehistory._last_recorded_txn('txn_id') -%}
  {%- set first = lakehistory._first_pending_version(history, last, operations) -%}
  {%- if first is none and is_incremental() -%}
    {{ return(lakehistory._nothing_to_append()) }}
  {%- endif -%}
  {%- set purged = load_relation(lakehistory.purged_keys_relation(history)) -%}
  {%- set key_list = lakehistory._columns(keys, none) -%}
  {%- set by_key = 'partition by ' ~ lakehistory._columns(keys, 's') ~ ' order by s.`txn_id`' -%}
  {%- set before = 'rows between unbounded preceding and 1 preceding' -%}
  {%- set values = [] -%}
  {%- for c in columns -%}
    {%- do values.append(('s.' if c in keys else 's.`values`.') ~ adapter.quote(c) ~ ' as ' ~ adapter.quote(c)) -%}
  {%- endfor -%}
with {{ lakehistory._changes_ctes(history, columns, last, first, operations) }},

steps as (
    select
        `txn_id`,
        {{ key_list }},
        case `kind` when 'insert' then 'CREATE' when 'update' then 'UPDATE' else 'DELETE' end as `action`,
        coalesce(`new`, `old`) as `values`,
        `kind` = 'delete' as `deleted`,
        `valid_time`
    from changes
    {%- if purged is not none %}
    union all
    -- the keys a pending cleanup removed versions of (recorded by lakehistory.cleanup)
    select
        u.`txn_id`,
        {{ lakehistory._columns(keys, 'u') }},
        'PURGE',
        null,
        null,
        null
    from {{ purged }} as u
    inner join pending as p on u.`txn_id` = p.`txn_id` and p.`operation` = 'cleanup'
    {%- endif %}
),

previous as (
    -- the last state of each key the pending transactions change
    {%- if is_incremental() %}
    select
        {{ lakehistory._columns(keys, 'l.s') }},
        l.s.`version`,
        l.s.`uuid`,
        l.s.`author`,
        l.s.`deleted`,
        l.s.`created_at`,
        l.s.`rtcts`,
        l.s.`valid_created_at`,
        l.s.`valid_updated_at`,
        struct({{ lakehistory._columns(columns, 'l.s') }}) as `values`
    from (
        select max_by(struct(f.*), f.`version`) as s
        from {{ this }} as f
        left semi join (select distinct {{ key_list }} from steps) as t on {{ lakehistory._join_on('f', 't', keys) }}
        group by {{ lakehistory._columns(keys, 'f') }}
    ) as l
    {%- else %}
    select
        {{ key_list }},
        cast(null as bigint) as `version`,
        cast(null as string) as `uuid`,
        cast(null as string) as `author`,
        cast(null as boolean) as `deleted`,
        cast(null as timestamp) as `created_at`,
        cast(null as timestamp) as `rtcts`,
        cast(null as timestamp) as `valid_created_at`,
        cast(null as timestamp) as `valid_updated_at`,
        `values`
    from steps
    where false
    {%- endif %}
),

numbered as (
    select
        s.*,
        p.`started_at`,
        p.`committed_at`,
        p.`app_id`,
        p.`txn_uuid`,
        case when s.`action` = 'CREATE' then coalesce(p.`author`, p.`app_id`) else p.`author` end as `own_author`,
        row_number() over ({{ by_key }}) as `nth`,
        row_number() over (partition by s.`txn_id` order by {{ lakehistory._columns(keys, 's') }}) as `ordinal`,
        {#- a sync's tables are landed tables; a revert's history tables -#}
        coalesce(greatest(array_position(array_sort(y.`tables`), p.`source_table`),
            array_position(array_sort(y.`tables`), p.`history_table`)) - 1, 0) as `slot`,
        coalesce(cast(ceil(log2(size(y.`tables`))) as int), 0) as `slot_bits`
    from steps as s
    inner join pending as p on s.`txn_id` = p.`txn_id`
    left join {{ lakehistory.syncs_relation() }} as y on y.`txn_id` = p.`txn_id`
),

chained as (
    select
        s.`txn_id`,
        {{ lakehistory._columns(keys, 's') }},
        s.`action`,
        coalesce(r.`version`, 0) + s.`nth` as `version`,
        {{ lakehistory.naksha_uuid(
            "case when s.`ordinal` < shiftleft(1L, 28 - s.`slot_bits`) and s.`txn_id` < 4294967296"
            ~ " then s.`txn_id` * 268435456 + shiftleft(s.`slot`, 28 - s.`slot_bits`) + s.`ordinal`"
            ~ " else raise_error('feature_states: transaction ' || s.`txn_id` || ' changes more rows of this table than a"
            ~ " uuid can number (2^28, shared among the tables of a sync)') end",
            's.`started_at`', 1) }} as `uuid`,
        r.`uuid` as `previous_uuid`,
        case when s.`action` = 'PURGE'
            then coalesce(last(s.`values`, true) over ({{ by_key }} {{ before }}), r.`values`)
            else s.`values`
        end as `values`,
        case when s.`action` = 'PURGE'
            then coalesce(last(s.`deleted`, true) over ({{ by_key }} {{ before }}), r.`deleted`, true)
            else s.`deleted`
        end as `deleted`,
        coalesce(s.`own_author`, last(s.`own_author`, true) over ({{ by_key }} {{ before }}), r.`author`, s.`app_id`) as `author`,
        s.`app_id`,
        s.`txn_uuid`,
        coalesce(r.`created_at`, first(s.`started_at`) over ({{ by_key }})) as `created_at`,
        s.`started_at` as `updated_at`,
        coalesce(r.`rtcts`, first(s.`committed_at`) over ({{ by_key }})) as `rtcts`,
        s.`committed_at` as `rtuts`,
        coalesce(r.`valid_created_at`, first(s.`valid_time`, true) over ({{ by_key }})) as `valid_created_at`,
        case when s.`action` = 'PURGE'
            then coalesce(last(s.`valid_time`, true) over ({{ by_key }} {{ before }}), r.`valid_updated_at`)
            else s.`valid_time`
        end as `valid_updated_at`
    from numbered as s
    left join previous as r on {{ lakehistory._join_on('s', 'r', keys) }}
),

states as (
    select
        s.*,
        case when s.`action` != 'CREATE' then coalesce(lag(s.`uuid`) over ({{ by_key }}), s.`previous_uuid`) end as `puuid`
    from chained as s
)

select
    {{ values | join(',\n    ') }},
    s.`action`,
    s.`version`,
    s.`uuid`,
    s.`puuid`,
    s.`txn_uuid` as `txn`,
    s.`txn_id`,
    s.`author`,
    s.`app_id`,
    s.`created_at`,
    s.`updated_at`,
    s.`rtcts`,
    s.`rtuts`,
    s.`valid_created_at`,
    s.`valid_updated_at`,
    s.`deleted`,
    {{ lakehistory._xyz_namespace('s') }} as `xyz`
from states as s
{% endmacro %}


{#- Seed 002's XYZ namespace of a state (alias `s`, with the columns above), as a struct. -#}
{% macro _xyz_namespace(s) %}
  {{- return("named_struct('action', " ~ s ~ ".`action`, 'version', " ~ s ~ ".`version`, 'author', " ~ s ~ ".`author`,"
      ~ " 'app_id', " ~ s ~ ".`app_id`, 'puuid', " ~ s ~ ".`puuid`, 'uuid', " ~ s ~ ".`uuid`, 'txn', " ~ s ~ ".`txn_uuid`,"
      ~ " 'createdAt', unix_millis(" ~ s ~ ".`created_at`), 'updatedAt', unix_millis(" ~ s ~ ".`updated_at`),"
      ~ " 'rtcts', unix_millis(" ~ s ~ ".`rtcts`), 'rtuts', unix_millis(" ~ s ~ ".`rtuts`))") -}}
{% endmacro %}

{% macro _xyz_namespace_type() %}
  {{- return('struct<action:string,version:bigint,author:string,app_id:string,puuid:string,uuid:string,txn:string,'
      ~ 'createdAt:bigint,updatedAt:bigint,rtcts:bigint,rtuts:bigint>') -}}
{% endmacro %}


{#- Where lakehistory.cleanup records the keys it removed versions of: `<history>__lh_purged`. -#}
{% macro purged_keys_relation(history) %}
  {{ return(adapter.dispatch('purged_keys_relation', 'lakehistory')(history)) }}
{% endmacro %}

{% macro default__purged_keys_relation(history) %}
  {{ return(history.incorporate(path={'identifier': history.identifier ~ '__lh_purged'})) }}
{% endmacro %}
