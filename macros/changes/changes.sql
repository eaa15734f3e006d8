{#-
  The changes of a history table, transaction by transaction, in two grains: `changes`, what each
  transaction did to the current state (the feature states, Naksha), and `version_changes`, every
  point of the keys' valid-time histories it brought (the event history, ESQL;
  version_changes.sql). Both are read from the same rows, so the two dialects cannot
  disagree with each other or with the time-travel macros about the table as of a transaction.

  The current state after transaction v is `lakehistory.as_of(history, v)` where `_fivetran_active`:
  one row per existing key. Transaction v changed a key when the key's active row before v (the
  active row closed by v: `valid_to = v`) differs from its active row after v (the active row opened
  by v: `valid_from = v`) in any data column or in `_fivetran_start`:

    insert   no active row before, one after
    delete   one before, none after
    update   both, and they differ

  Each change has a valid time: the new row's `_fivetran_start` for an insert or an update; for a
  delete, the instant the key stopped existing at the source (its last version's `_fivetran_end`
  + 1 ms, as in the `_hx` tables), NULL if the transaction left the key no row at all (a rewind
  past its first version).

  `changes` reads only the rows opened or closed by the pending transactions: two range predicates
  on valid_from and valid_to that Delta skips files by, so its cost follows the batches.
-#}

{#- CTEs `pending` (the transactions after `after_txn` of `operations` on `history`) and `changes`
    (txn_id, the key columns, kind, valid_time, and the structs `old` and `new` of the data
    columns), to put after `with`. `first` is the first pending version as SQL, none when nothing
    is pending. -#}
{% macro _changes_ctes(history, after_txn, first, operations=['batch', 'revert']) %}
  {%- set keys = lakehistory.history_keys(history) -%}
  {%- set columns = lakehistory.history_data_columns(history) -%}
  {%- set rows = lakehistory.versioned(history) -%}
  {%- set version = 'txn_id' if lakehistory.version_type() == 'integer' else 'started_at' -%}
  {%- set same_key = lakehistory._join_on('b', 'a', keys) -%}
  {#- nothing pending: every scan gets a range no row is in -#}
  {%- set lo = first if first is not none else lakehistory.end_of_time() -%}
  {%- set unchanged = [] -%}
  {%- for c in columns + ['_fivetran_start'] -%}
    {%- do unchanged.append('b.' ~ adapter.quote(c) ~ ' <=> a.' ~ adapter.quote(c)) -%}
  {%- endfor -%}
  {%- set merged_keys = [] -%}
  {%- for k in keys -%}
    {%- do merged_keys.append('coalesce(a.' ~ adapter.quote(k) ~ ', b.' ~ adapter.quote(k) ~ ') as ' ~ adapter.quote(k)) -%}
  {%- endfor -%}
pending as (
    select
        t.`txn_id`,
        t.`txn_uuid`,
        t.`{{ version }}` as `version`,
        t.`operation`,
        t.`author`,
        t.`app_id`,
        t.`started_at`
    from {{ lakehistory.transactions_relation() }} as t
    where
        t.`history_table` = {{ lakehistory._text(history) }}
        and t.`operation` in ('{{ operations | join("', '") }}')
        and t.`txn_id` > {{ after_txn }}
        and {{ 'true' if first is not none else 'false' }}
),

opened as (
    -- rows a pending transaction made part of the table
    select
        p.`txn_id`,
        h.*
    from {{ rows }} as h
    inner join pending as p on h.`valid_from` = p.`version`
    where h.`valid_from` >= {{ lo }}
),

closed as (
    -- the active rows a pending transaction took out of the table
    select
        p.`txn_id`,
        h.*
    from {{ rows }} as h
    inner join pending as p on h.`valid_to` = p.`version`
    where
        h.`_fivetran_active`
        and h.`valid_to` >= {{ lo }}
        and {{ lakehistory.valid_to_sql('h') }} < {{ lakehistory.end_of_time() }}
),

ended as (
    -- when a deleted key stopped existing: its last version's end + 1 ms
    select
        `txn_id`,
        {{ lakehistory._columns(keys, none) }},
        max(`_fivetran_end`) + interval 1 millisecond as `deleted_at`
    from opened
    where not `_fivetran_active`
    group by `txn_id`, {{ lakehistory._columns(keys, none) }}
),

paired as (
    select
        coalesce(a.`txn_id`, b.`txn_id`) as `txn_id`,
        {{ merged_keys | join(',\n        ') }},
        case
            when b.`txn_id` is null then 'insert'
            when a.`txn_id` is null then 'delete'
            else 'update'
        end as `kind`,
        a.`_fivetran_start` as `new_start`,
        case when b.`txn_id` is not null then struct({{ lakehistory._columns(columns, 'b') }}) end as `old`,
        case when a.`txn_id` is not null then struct({{ lakehistory._columns(columns, 'a') }}) end as `new`
    from closed as b
    full outer join (select * from opened where `_fivetran_active`) as a
        on b.`txn_id` = a.`txn_id` and {{ same_key }}
    where not (b.`txn_id` is not null and a.`txn_id` is not null and {{ unchanged | join(' and ') }})
),

changes as (
    select
        c.`txn_id`,
        {{ lakehistory._columns(keys, 'c') }},
        c.`kind`,
        case when c.`kind` = 'delete' then e.`deleted_at` else c.`new_start` end as `valid_time`,
        c.`old`,
        c.`new`
    from paired as c
    left join ended as e
        on c.`kind` = 'delete' and c.`txn_id` = e.`txn_id` and {{ lakehistory._join_on('c', 'e', keys) }}
)
{%- endmacro %}


{#- The data columns of a history table: all but the Fivetran and transaction-time columns. -#}
{% macro history_data_columns(history) %}
  {{ return(adapter.dispatch('history_data_columns', 'lakehistory')(history)) }}
{% endmacro %}

{% macro default__history_data_columns(history) %}
  {%- set system = ['_fivetran_start', '_fivetran_end', '_fivetran_active', '_fivetran_synced', 'valid_from', 'valid_to', 'removal'] -%}
  {{ return(adapter.get_columns_in_relation(history) | map(attribute='name') | reject('in', system) | list) }}
{% endmacro %}


{#- The first version (SQL literal) of the transactions after `after_txn` of `operations` on
    `history`, or none: read when the model compiles, so the scans get a plain range predicate. -#}
{% macro _first_pending_version(history, after_txn, operations=['batch', 'revert']) %}
  {%- if lakehistory._builds() -%}
    {#- not load_relation: the history model of this same run may have just created the table,
        which dbt's relation cache does not know -#}
    {%- set transactions = lakehistory.ensure_transactions_table() -%}
  {%- else -%}
    {#- compile, docs: read what is there, create nothing -#}
    {%- set transactions = lakehistory.transactions_relation() -%}
    {%- if adapter.get_relation(transactions.database, transactions.schema, transactions.identifier) is none -%}
      {{ return(none) }}
    {%- endif -%}
  {%- endif -%}
  {%- set row = run_query(
      "select min(txn_id), date_format(min(started_at), 'yyyy-MM-dd HH:mm:ss.SSSSSS') from " ~ transactions
      ~ " where history_table = " ~ lakehistory._text(history) ~ " and operation in ('" ~ (operations | join("', '"))
      ~ "') and txn_id > " ~ (after_txn | int)).rows[0] -%}
  {%- if row[0] is none -%}{{ return(none) }}{%- endif -%}
  {{ return(row[0] | int if lakehistory.version_type() == 'integer' else "timestamp'" ~ row[1] ~ "'") }}
{% endmacro %}


{#- The largest transaction id a derived incremental model already holds (0 before its first build). -#}
{% macro _last_recorded_txn(column) %}
  {%- if not is_incremental() -%}{{ return(0) }}{%- endif -%}
  {{ return(run_query("select coalesce(max(" ~ adapter.quote(column) ~ "), 0) from " ~ this).rows[0][0] | int) }}
{% endmacro %}


{#- A data column the history table gained since this model's last build (an add_column schema
    change, spec rule 17) joins the model's table before the new rows are appended; its rows
    from before read NULL in it, as the history table's versions from before do. -#}
{% macro _take_new_columns(history, columns) %}
  {%- if not (is_incremental() and lakehistory._builds()) -%}{{ return(none) }}{%- endif -%}
  {%- set have = adapter.get_columns_in_relation(this) | map(attribute='name') | map('lower') | list -%}
  {%- set missing = [] -%}
  {%- for c in columns if c | lower not in have -%}{%- do missing.append(c) -%}{%- endfor -%}
  {%- if missing | length == 0 -%}{{ return(none) }}{%- endif -%}
  {%- set new = [] -%}
  {%- for c in adapter.get_columns_in_relation(history) if c.name in missing -%}
    {%- do new.append(adapter.quote(c.name) ~ ' ' ~ c.data_type) -%}
  {%- endfor -%}
  {%- do run_query('alter table ' ~ this ~ ' add columns (' ~ (new | join(', ')) ~ ')') -%}
{% endmacro %}


{#- What a model over a history table compiles to before that table exists (dbt compile, docs):
    a run stops instead, since the table it would create could not take the real rows later. -#}
{% macro _not_built_yet(history) %}
  {%- if execute and flags.WHICH in ('run', 'build') -%}
    {{ exceptions.raise_compiler_error(history ~ " does not exist yet: build it first (dbt build --select +" ~ model.name ~ ")") }}
  {%- endif -%}
  {{ return('select 1 as `not_built_yet` where false') }}
{% endmacro %}


{#- The data columns of `history`, refused when one of them has a name the model adds itself. -#}
{% macro _data_columns_without(history, reserved) %}
  {%- set columns = lakehistory.history_data_columns(history) -%}
  {%- for c in columns -%}
    {%- if c | lower in reserved or (c | lower).startswith('_hist_') -%}
      {{ exceptions.raise_compiler_error(model.name ~ ": " ~ history ~ " has a column " ~ c
          ~ ", a name this model gives a column of its own (" ~ ((reserved + ['_hist_*']) | join(', ')) ~ "). Rename it in the staging model.") }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}
