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

  `changes` reads only the rows opened or closed by the pending transactions, in one scan with a
  range predicate on valid_to that Delta skips files by, so its cost follows the batches; one
  aggregate then pairs each key's closed and opened rows.
-#}

{#- CTEs `pending` (the transactions after `after_txn` of `operations` on `history`), `moved` and,
    unless `paired` is false, `changes` (txn_id, the key columns, kind, valid_time, and the structs
    `old` and `new` of the data columns), to put after `with`. `columns` are the history table's
    data columns (the caller has read them), `first` the first pending version as SQL, none when
    nothing is pending. -#}
{% macro _changes_ctes(history, columns, after_txn, first, operations=['batch', 'edit', 'revert', 'snapshot'], paired=true) %}
  {%- set keys = lakehistory.history_keys(history) -%}
  {%- set rows = lakehistory.versioned(history) -%}
  {%- set version = 'txn_id' if lakehistory.version_type() == 'integer' else 'started_at' -%}
  {%- set key_list = lakehistory._columns(keys, none) -%}
  {%- set valid_to = lakehistory.valid_to_sql('h') -%}
  {#- nothing pending: every scan gets a range no row is in -#}
  {%- set lo = first if first is not none else lakehistory.end_of_time() -%}
pending as (
    select
        t.`txn_id`,
        t.`txn_uuid`,
        t.`{{ version }}` as `version`,
        t.`operation`,
        t.`author`,
        t.`app_id`,
        t.`started_at`,
        t.`committed_at`,
        t.`source_table`,
        t.`history_table`
    from {{ lakehistory.transactions_relation() }} as t
    where
        t.`history_table` = {{ lakehistory._text(history) }}
        and t.`operation` in ('{{ operations | join("', '") }}')
        and t.`txn_id` > {{ after_txn }}
        and {{ lakehistory._moved_rows('t') }}
        and {{ 'true' if first is not none else 'false' }}
),

moved as (
    -- the rows a pending transaction opened (made part of the table) or closed (an active row
    -- it took out), with that transaction: one scan of the rows live at a pending version
    select
        p.`txn_id`,
        p.`version`,
        {{ lakehistory._columns(keys, 'm') }},
        m.`move`.`closes`,
        m.`_fivetran_active`,
        m.`_fivetran_start`,
        m.`_fivetran_end`,
        m.`row`
    from (
        select
            {{ lakehistory._columns(keys, 'h') }},
            h.`_fivetran_active`,
            h.`_fivetran_start`,
            h.`_fivetran_end`,
            struct({{ lakehistory._columns(columns, 'h') }}) as `row`,
            e.`move`
        from {{ rows }} as h
        lateral view explode(array(
            named_struct('closes', false, 'at', h.`valid_from`),
            case when h.`_fivetran_active` and {{ valid_to }} < {{ lakehistory.end_of_time() }}
                then named_struct('closes', true, 'at', h.`valid_to`) end
        )) e as `move`
        where {{ valid_to }} >= {{ lo }}
    ) as m
    inner join pending as p on m.`move`.`at` = p.`version`
){%- if paired %},

paired as (
    -- per transaction and key: the active row it closed (b), the active row it opened (a), and
    -- when a deleted key stopped existing (its last version's end + 1 ms)
    select
        `txn_id`,
        {{ key_list }},
        any_value(case when `closes` then named_struct('start', `_fivetran_start`, 'row', `row`) end, true) as `b`,
        any_value(case when not `closes` and `_fivetran_active`
            then named_struct('start', `_fivetran_start`, 'row', `row`) end, true) as `a`,
        max(case when not `closes` and not `_fivetran_active` then `_fivetran_end` end)
            + interval 1 millisecond as `deleted_at`
    from moved
    group by `txn_id`, {{ key_list }}
),

changes as (
    select
        `txn_id`,
        {{ key_list }},
        case when `b` is null then 'insert' when `a` is null then 'delete' else 'update' end as `kind`,
        case when `a` is null then `deleted_at` else `a`.`start` end as `valid_time`,
        `b`.`row` as `old`,
        `a`.`row` as `new`
    from paired
    -- a key with neither (only versions closed as they came) or both alike did not change
    where (`a` is not null or `b` is not null) and not (`a` <=> `b`)
)
{%- endif %}
{%- endmacro %}


{#- The data columns of a history table: all but the protocol's and transaction time's columns
    (any other `_fivetran_*` column is data); of a snapshot of extracts, all but dbt's and the
    extract's own. -#}
{% macro history_data_columns(history) %}
  {{ return(adapter.dispatch('history_data_columns', 'lakehistory')(history)) }}
{% endmacro %}

{% macro default__history_data_columns(history) %}
  {%- set system = lakehistory._reserved_columns('history_system') -%}
  {%- if lakehistory._extract_snapshot_node(history) is not none -%}
    {%- set system = system + lakehistory._reserved_columns('extract') -%}
  {%- endif -%}
  {{ return(adapter.get_columns_in_relation(history) | map(attribute='name') | reject('in', system) | list) }}
{% endmacro %}


{#- The first version (SQL literal) of the transactions after `after_txn` of `operations` on
    `history`, or none: read when the model compiles, so the scans get a plain range predicate. -#}
{% macro _first_pending_version(history, after_txn, operations=['batch', 'edit', 'revert', 'snapshot']) %}
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
      ~ " as t where history_table = " ~ lakehistory._text(history) ~ " and operation in ('" ~ (operations | join("', '"))
      ~ "') and txn_id > " ~ (after_txn | int) ~ " and " ~ lakehistory._moved_rows('t')).rows[0] -%}
  {%- if row[0] is none -%}{{ return(none) }}{%- endif -%}
  {{ return(row[0] | int if lakehistory.version_type() == 'integer' else "timestamp'" ~ row[1] ~ "'") }}
{% endmacro %}


{#- Whether the transaction (alias `t` of the transactions table) opened, closed or purged a row
    of its history table; declared once, in Python, for the `_hx` models too. -#}
{% macro _moved_rows(t) %}
  {%- if not execute -%}{{ return('true') }}{%- endif -%}
  {{ return(lakehistory._engine('moved_rows_sql', {'alias': t})) }}
{% endmacro %}


{#- The body of an incremental model with no pending transaction: its own columns and no row,
    so the append plans no scan of the history table and runs no Spark job. -#}
{% macro _nothing_to_append() %}
  {{ return('select * from ' ~ this ~ ' where false') }}
{% endmacro %}


{#- The largest transaction id a derived incremental model already holds (0 before its first build). -#}
{% macro _last_recorded_txn(column) %}
  {%- if not is_incremental() -%}{{ return(0) }}{%- endif -%}
  {{ return(run_query("select coalesce(max(" ~ adapter.quote(column) ~ "), 0) from " ~ this).rows[0][0] | int) }}
{% endmacro %}


{#- A derived model (`kind`: events or states) follows its history table. A data column the
    history table gained since this model's last build (an add_column schema change, spec rule
    17) joins the model's table before the new rows are appended; its rows from before read NULL
    in it, as the history table's versions from before do. So does a column of the model's own
    (`own`: name to type) that a later release of lakehistory added. The history table is also
    remembered for the model's post-hook, `_carry_not_null`. -#}
{% macro _follow_history(history, kind, columns, own={}) %}
  {%- if not lakehistory._builds() -%}{{ return(none) }}{%- endif -%}
  {#- the column rule the `_hx` builds follow too (lakehistory.derived.take_new_columns) -#}
  {%- do lakehistory._engine('follow_history', {'table': this | string, 'history': history | string, 'kind': kind,
      'columns': columns, 'own_columns': own, 'incremental': is_incremental()}) -%}
{% endmacro %}


{#- The post-hook event_history and feature_states give their model: once the table exists, each
    column its history table declares NOT NULL becomes a CHECK constraint of it
    (lakehistory.derived.carry_not_null). Renders no SQL. -#}
{% macro _carry_not_null() %}
  {%- if lakehistory._builds() -%}
    {%- do lakehistory._engine('carry_not_null', {'table': this | string}) -%}
  {%- endif -%}
{% endmacro %}


{#- What a model over a history table compiles to before that table exists (dbt compile, docs):
    a run stops instead, since the table it would create could not take the real rows later. -#}
{% macro _not_built_yet(history) %}
  {%- if execute and flags.WHICH in ('run', 'build') -%}
    {{ exceptions.raise_compiler_error(history ~ " does not exist yet: build it first (dbt build --select +" ~ model.name ~ ")") }}
  {%- endif -%}
  {{ return('select 1 as `not_built_yet` where false') }}
{% endmacro %}


{#- The data columns of `history`, refused when one of them has a name a `kind` model ('events',
    'states') gives a column of its own. -#}
{% macro _data_columns_without(history, kind) %}
  {%- set columns = lakehistory.history_data_columns(history) -%}
  {%- set reserved = lakehistory._reserved_columns(kind) -%}
  {%- set taken = reserved | map('lower') | list -%}
  {%- for c in columns -%}
    {%- if c | lower in taken -%}
      {{ exceptions.raise_compiler_error(model.name ~ ": " ~ history ~ " has a column " ~ c
          ~ ", a name this model gives a column of its own (" ~ (reserved | join(', ')) ~ "). Rename it in the history model's select.") }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(columns) }}
{% endmacro %}


{#- The column names lakehistory gives a `kind` table's own columns (lakehistory.names.RESERVED),
    or with 'history_system' the columns a history table adds to its source's. -#}
{% macro _reserved_columns(kind) %}
  {%- set names = lakehistory._names() -%}
  {{ return(names['history_system'] if kind == 'history_system' else names['reserved'][kind]) }}
{% endmacro %}
