{#-
  Applies one staged batch (`_lh_ordinal = ordinal`) to a history table: one Delta MERGE, then
  the transaction record. The spec's rule numbers are in the comments.

  1. Compute the new live rows of the batch's keys from their live rows and the batch (rules 6-11).
  2. Diff them against the live rows: a live row that is gone or different is closed
     (valid_to = txn); a new or different row is opened (valid_from = txn); equal rows stay.
  3. MERGE the diff in one commit; record the transaction.

  The batch and its keys' live rows are cached; the diff is written to a small Delta table,
  `<history>__lh_changes`, dropped after the transaction is recorded. Delta's MERGE never reads a
  cached source (it recomputes it from its whole lineage), but it reads a Delta table as it is.
-#}
{% macro _apply_history_batch(target, staged, transactions, keys, columns, deleted_column, ordinal, add_columns=[]) %}
  {%- set data_columns = columns | map(attribute='name') | reject('in', keys) | list -%}
  {%- set first_key = columns | selectattr('name', 'equalto', keys[0]) | first -%}
  {%- set txn_id, started_at = lakehistory.next_transaction(transactions) -%}
  {%- set version = lakehistory.version_value(txn_id, started_at) -%}
  {%- set open = lakehistory.open_version() -%}
  {%- set append_only = lakehistory.append_only() -%}
  {%- set value_columns = data_columns + ['_fivetran_start', '_fivetran_end', '_fivetran_active', '_fivetran_synced'] -%}

  {%- do lakehistory._release_batch(target) -%}
  {#- The batch's rows and its keys' live rows are read once and kept in memory for the steps below. -#}
  {%- call statement('lakehistory_batch') -%}
    cache table `__lh_batch` as
    select * from {{ staged }} where `_lh_ordinal` = {{ ordinal }}
  {%- endcall -%}
  {#- The batch marker (its truncate mode) and the schema changes, in one query. -#}
  {%- set meta = namespace(truncate_mode=none) -%}
  {%- set schema_changes = [] -%}
  {%- for row in run_query(
      "select `_lh_kind`, `_lh_truncate_mode`, `_lh_row`, `_lh_change_op`, `_lh_change_column` from `__lh_batch`"
      ~ " where `_lh_kind` in ('batch', 'schema_change') order by `_lh_kind`, `_lh_row`").rows -%}
    {%- if row[0] == 'batch' -%}
      {%- set meta.truncate_mode = row[1] -%}
    {%- else -%}
      {%- do schema_changes.append(row[2:]) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set truncate_mode = meta.truncate_mode -%}
  {#- The stored columns by name; a column the table gains in this batch is NULL in its rows. -#}
  {%- set added = {} -%}
  {%- for column in add_columns -%}
    {%- do added.update({column.name: column.data_type}) -%}
  {%- endfor -%}
  {%- set live_columns = [] -%}
  {%- for name in keys + value_columns + ['valid_from'] -%}
    {%- if name in added -%}
      {%- do live_columns.append('cast(null as ' ~ added[name] ~ ') as ' ~ adapter.quote(name)) -%}
    {%- else -%}
      {%- do live_columns.append('t.' ~ adapter.quote(name)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set live_columns = live_columns | join(', ') -%}
  {#- The batch's range of its first key column, as session variables: Spark folds them into
      literals, so Delta skips the files of a table clustered by key that hold none of the batch's
      keys (no data value is written into the SQL text). -#}
  {%- call statement('lakehistory_key_range') -%}
    declare or replace variable `__lh_key_lo` {{ first_key.data_type }}
  {%- endcall -%}
  {%- call statement('lakehistory_key_range') -%}
    declare or replace variable `__lh_key_hi` {{ first_key.data_type }}
  {%- endcall -%}
  {%- call statement('lakehistory_key_range') -%}
    set var (`__lh_key_lo`, `__lh_key_hi`) = (
        select min({{ adapter.quote(keys[0]) }}), max({{ adapter.quote(keys[0]) }})
        from `__lh_batch`
        where `_lh_kind` in {{ lakehistory._row_kinds() }}
    )
  {%- endcall -%}
  {%- set in_key_range = "t." ~ adapter.quote(keys[0]) ~ " between `__lh_key_lo` and `__lh_key_hi`" -%}
  {%- call statement('lakehistory_live') -%}
    cache table `__lh_live` as
    select {{ live_columns }}
    from {{ lakehistory._current_rows(target, keys, in_key_range) }} as t
    left semi join (
        select distinct {{ lakehistory._columns(keys, none) }} from `__lh_batch` where `_lh_kind` in {{ lakehistory._row_kinds() }}
    ) as b
        on {{ lakehistory._join_on('t', 'b', keys) }}
    {%- if truncate_mode in ('hard', 'soft') %}
    union
    -- a truncate (rules 15, 16) reaches the rows synced before its cutoff, whatever their key
    select {{ live_columns }}
    from {{ lakehistory._current_rows(target, keys) }} as t
    inner join `__lh_batch` as m
        on m.`_lh_kind` = 'batch'
        and t.`_fivetran_synced` < m.`_lh_truncate_before`
    {%- if truncate_mode == 'soft' %}
    where t.`_fivetran_active`
    {%- endif %}
    {%- endif %}
    {%- if schema_changes | length > 0 %}
    union
    -- a schema change (rule 17) reaches every active row
    select {{ live_columns }}
    from {{ lakehistory._current_rows(target, keys) }} as t
    where t.`_fivetran_active`
    {%- endif %}
  {%- endcall -%}
  {%- call statement('lakehistory_new_live') -%}
    create or replace temporary view `__lh_new_live` as
    {{ lakehistory._new_live_rows_sql(keys, data_columns, deleted_column, schema_changes) }}
  {%- endcall -%}

  {%- set changes = lakehistory._changes_relation(target) -%}
  {%- call statement('lakehistory_changes') -%}
    create or replace table {{ changes }} using delta as
    select
        {%- for key in keys %}
        coalesce(old.{{ adapter.quote(key) }}, new.{{ adapter.quote(key) }}) as {{ adapter.quote(key) }},
        {%- endfor %}
        old.`_fivetran_start` as `_lh_old_start`,
        {%- for column in value_columns %}
        new.{{ adapter.quote(column) }},
        {%- endfor %}
        case
            when old.{{ adapter.quote(keys[0]) }} is null then 'open'
            when new.{{ adapter.quote(keys[0]) }} is null then 'close'
            when {% for column in value_columns %}old.{{ adapter.quote(column) }} <=> new.{{ adapter.quote(column) }}{% if not loop.last %} and {% endif %}{% endfor %} then 'same'
            else 'replace'
        end as `_lh_action`
    from `__lh_live` as old
    full outer join `__lh_new_live` as new
        on {{ lakehistory._join_on('old', 'new', keys) }}
        and old.`_fivetran_start` = new.`_fivetran_start`
  {%- endcall -%}

  {#- The transaction's counts, the batch's rows, and whether a new row repeats another's start:
      one query. -#}
  {%- set stats = run_query(
      "select count_if(`_lh_action` in ('open', 'replace')), count_if(`_lh_action` in ('close', 'replace')),"
      ~ " count_if(`_lh_action` = 'close'),"
      ~ " (select count(*) from `__lh_batch` where `_lh_kind` in " ~ lakehistory._row_kinds() ~ "),"
      ~ " (select count(*) from (select 1 from " ~ changes ~ " where `_lh_action` <> 'close'"
      ~ " group by " ~ lakehistory._columns(keys, none) ~ ", `_fivetran_start` having count(*) > 1))"
      ~ " from " ~ changes).rows[0] -%}
  {%- set rows_in = stats[3] -%}
  {#- Rule 9 inserts rows as sent: a key without an earliest start whose version repeats the start
      of a row it already has would give the table two rows with one primary key. -#}
  {%- if stats[4] | int > 0 -%}
    {%- set clash = run_query(
        "select " ~ lakehistory._columns(keys, none) ~ ", `_fivetran_start` from " ~ changes
        ~ " where `_lh_action` <> 'close' group by all having count(*) > 1 limit 1").rows[0] -%}
    {%- do lakehistory._release_batch(target) -%}
    {{ exceptions.raise_compiler_error(
        "Batch " ~ lakehistory._batch_label(staged, ordinal) ~ ": a version of key " ~ (clash[:-1] | list) ~
        " has _fivetran_start " ~ clash[-1] ~ ", which the table already holds, and the batch gives no earliest start"
        ~ " for the key that would replace it (spec rules 6, 7, 9). This batch and the later ones were not applied.") }}
  {%- endif -%}

  {#- Rule 17 "add the column": a column the rows bring that the table lacks joins the table, next
      to the source columns, just before the batch's MERGE (its own Delta commit; a re-run finds it
      there and goes on). -#}
  {%- for column in add_columns -%}
    {%- set names = keys + data_columns -%}
    {%- call statement('lakehistory_add_column') -%}
      alter table {{ target }} add columns (
          {{ adapter.quote(column.name) }} {{ column.data_type }} after {{ adapter.quote(names[names.index(column.name) - 1]) }}
      )
    {%- endcall -%}
  {%- endfor -%}

  {%- if append_only -%}
  {#- Append-only: a new or rewritten row is appended; a row that leaves gets a removal row. -#}
  {%- call statement('lakehistory_append') -%}
    insert into {{ target }} ({{ lakehistory._columns(keys + value_columns, none) }}, `valid_from`, `removal`)
    select {{ lakehistory._columns(keys + value_columns, 'c') }}, {{ version }}, false
    from {{ changes }} as c
    where c.`_lh_action` in ('open', 'replace')
    union all
    select {{ lakehistory._columns(keys + value_columns, 'l') }}, {{ version }}, true
    from {{ changes }} as c
    inner join `__lh_live` as l
        on {{ lakehistory._join_on('l', 'c', keys) }}
        and l.`_fivetran_start` = c.`_lh_old_start`
    where c.`_lh_action` = 'close'
  {%- endcall -%}
  {%- else -%}
  {%- call statement('lakehistory_merge') -%}
    merge into {{ target }} as t
    using (
        select *, true as `_lh_closes` from {{ changes }} where `_lh_action` in ('close', 'replace')
        union all
        select *, false as `_lh_closes` from {{ changes }} where `_lh_action` in ('open', 'replace')
    ) as s
    on s.`_lh_closes`
        and {{ lakehistory._join_on('t', 's', keys) }}
        and t.`_fivetran_start` = s.`_lh_old_start`
        and {{ lakehistory.is_current('t') }}
        {%- if truncate_mode not in ('hard', 'soft') and schema_changes | length == 0 %}
        -- every row the batch closes is of its keys: Delta rewrites only the files of that range
        and {{ in_key_range }}
        {%- endif %}
    when matched then update set t.`valid_to` = {{ version }}
    when not matched and not s.`_lh_closes` then insert (
        {{ lakehistory._columns(keys + value_columns, none) }}, `valid_from`, `valid_to`
    ) values (
        {{ lakehistory._columns(keys + value_columns, 's') }}, {{ version }}, {{ open }}
    )
  {%- endcall -%}
  {%- endif -%}
  {%- set delta_version = run_query("describe history " ~ target ~ " limit 1").rows[0][0] | int -%}

  {%- call statement('lakehistory_record_transaction') -%}
    insert into {{ transactions }} ({{ lakehistory.transaction_columns() }})
    select
        {{ txn_id }} as txn_id,
        {{ lakehistory.naksha_uuid(txn_id, "timestamp'" ~ started_at ~ "'", 0) }} as txn_uuid,
        'batch' as operation,
        b.`_lh_source_table` as source_table,
        '{{ target | replace("'", "") }}' as history_table,
        b.`_lh_batch_id` as batch_id,
        b.`_lh_sequence` as batch_sequence,
        b.`_lh_author` as author,
        b.`_lh_app_id` as app_id,
        b.`_lh_commit_message` as commit_message,
        timestamp'{{ started_at }}' as started_at,
        current_timestamp() as committed_at,
        {{ rows_in | int }} as rows_in,
        {{ stats[0] | int }} as versions_opened,
        {{ stats[1] | int }} as versions_closed,
        {{ stats[2] | int }} as rows_overlap_deleted,
        0 as rows_purged,
        {{ delta_version }} as delta_version
    from `__lh_batch` as b
    where b.`_lh_kind` = 'batch'
  {%- endcall -%}
  {#- Ids are max + 1: one writer at a time per lakehouse. A second writer shows as a repeated id. -#}
  {%- set writers = run_query("select count(*) from " ~ transactions ~ " where txn_id = " ~ txn_id).rows[0][0] -%}
  {%- if writers | int != 1 -%}
    {%- do lakehistory._release_batch(target) -%}
    {{ exceptions.raise_compiler_error(
        "Transaction " ~ txn_id ~ " was recorded " ~ writers ~ " times: another dbt run applied batches to this lakehouse"
        ~ " at the same time. Run history models from one dbt invocation at a time.") }}
  {%- endif -%}
  {%- do lakehistory._release_batch(target) -%}
{% endmacro %}


{#- The rows of a history table current in transaction time (alias `t` inside `pre_filter`, which
    may only restrict keys: it applies before an append-only table's latest versions are picked). -#}
{% macro _current_rows(target, keys, pre_filter='true') %}
  {%- if lakehistory.append_only() -%}
    {{- return(
        "(select * except (`_lh_rank`, `removal`) from (select t.*, row_number() over (partition by "
        ~ lakehistory._columns(keys + ['_fivetran_start'], 't') ~ " order by t.`valid_from` desc) as `_lh_rank` from "
        ~ target ~ " as t where " ~ pre_filter ~ ") where `_lh_rank` = 1 and not `removal`)") -}}
  {%- else -%}
    {{- return("(select * from " ~ target ~ " as t where " ~ lakehistory.is_current('t') ~ " and " ~ pre_filter ~ ")") -}}
  {%- endif -%}
{% endmacro %}


{#- The batch's views and its changes table, released (dropping a cached view frees its cache). -#}
{% macro _release_batch(target) %}
  {%- do run_query("drop table if exists " ~ lakehistory._changes_relation(target)) -%}
  {%- for view in ['__lh_new_live', '__lh_live', '__lh_batch'] -%}
    {%- do run_query("drop view if exists `" ~ view ~ "`") -%}
  {%- endfor -%}
  {%- do run_query("drop temporary variable if exists `__lh_key_lo`") -%}
  {%- do run_query("drop temporary variable if exists `__lh_key_hi`") -%}
{% endmacro %}


{#- Where a batch's changes wait for its MERGE: `<history>__lh_changes`, beside the history table. -#}
{% macro _changes_relation(target) %}
  {{ return(target.incorporate(path={'identifier': target.identifier ~ '__lh_changes'})) }}
{% endmacro %}


{#- The Fivetran rows of the batch's keys after the batch (`__lh_batch` applied to `__lh_live`):
    rules 6 to 11. -#}
{% macro _new_live_rows_sql(keys, data_columns, deleted_column, schema_changes=[]) %}
  {%- set plain_columns = data_columns | reject('equalto', deleted_column) | list -%}
  {%- set by_key = lakehistory._columns(keys, none) -%}
  {%- set row_columns = keys + data_columns + ['_fivetran_start', '_fivetran_end', '_fivetran_active', '_fivetran_synced'] -%}
  {%- set live = namespace(name='truncated') -%}
    with
    batch as (
        select * from `__lh_batch`
    ),

    batch_meta as (
        select
            -- the batch names the table's deleted column (seed form)
            coalesce(max(`_lh_deleted_column`) = '{{ deleted_column or '' }}', false) as mark_deleted,
            max(`_lh_truncate_mode`) as truncate_mode,
            max(`_lh_truncate_before`) as truncate_before
        from batch
        where `_lh_kind` = 'batch'
    ),

    -- rule 15: a hard truncate deletes every row synced before the cutoff;
    -- rule 16: a soft truncate ends the active ones at the cutoff
    truncated as (
        select
            l.* except (`_fivetran_end`, `_fivetran_active`),
            case
                when coalesce(m.truncate_mode = 'soft' and l.`_fivetran_active` and l.`_fivetran_synced` < m.truncate_before, false)
                    then m.truncate_before
                else l.`_fivetran_end`
            end as `_fivetran_end`,
            l.`_fivetran_active`
                and not coalesce(m.truncate_mode = 'soft' and l.`_fivetran_synced` < m.truncate_before, false)
                as `_fivetran_active`
        from `__lh_live` as l
        cross join batch_meta as m
        where not coalesce(m.truncate_mode = 'hard' and l.`_fivetran_synced` < m.truncate_before, false)
    ),

    {%- for change in schema_changes %}
    {%- set op, column = change[1], adapter.quote(change[2]) %}
    {%- if op == 'add_column' %}
    {%- set copies = "l.`_fivetran_active` and l.`_fivetran_start` < c.`_lh_at`" %}
    {%- set in_place = "l.`_fivetran_active` and l.`_fivetran_start` = c.`_lh_at` and l." ~ column ~ " is null" %}
    {%- else %}
    {%- set copies = "l.`_fivetran_active` and l.`_fivetran_start` < c.`_lh_at` and l." ~ column ~ " is not null" %}
    {%- set in_place = "l.`_fivetran_active` and l.`_fivetran_start` = c.`_lh_at` and l." ~ column ~ " is not null" %}
    {%- endif %}

    -- rule 17, schema change {{ loop.index }} ({{ op }} {{ change[2] }}) at T: an active row that
    -- started before T is closed at T - 1 ms and copied at T with the column's new value (the
    -- default, or NULL for a drop); a row starting at T (an earlier change at the same T) takes
    -- the value in place, so changes at one T compose and repeating one changes nothing
    change_{{ loop.index }} as (
        select `_fivetran_start` as `_lh_at`, {{ column }} as `_lh_value`
        from batch
        where `_lh_kind` = 'schema_change' and `_lh_row` = {{ change[0] }}
    ),

    changed_{{ loop.index }} as (
        select
            {%- for name in row_columns %}
            {%- if adapter.quote(name) == column %}
            case when {{ in_place }} then c.`_lh_value` else l.{{ column }} end as {{ column }},
            {%- elif name == '_fivetran_end' %}
            case when {{ copies }} then c.`_lh_at` - interval 1 millisecond else l.`_fivetran_end` end as `_fivetran_end`,
            {%- elif name == '_fivetran_active' %}
            l.`_fivetran_active` and not coalesce({{ copies }}, false) as `_fivetran_active`,
            {%- else %}
            l.{{ adapter.quote(name) }}{% if not loop.last %},{% endif %}
            {%- endif %}
            {%- endfor %}
        from {{ live.name }} as l
        cross join change_{{ loop.index }} as c
        union all
        select
            {%- for name in row_columns %}
            {%- if adapter.quote(name) == column %}
            c.`_lh_value` as {{ column }},
            {%- elif name == '_fivetran_start' %}
            c.`_lh_at` as `_fivetran_start`,
            {%- else %}
            l.{{ adapter.quote(name) }}{% if not loop.last %},{% endif %}
            {%- endif %}
            {%- endfor %}
        from {{ live.name }} as l
        cross join change_{{ loop.index }} as c
        where {{ copies }}
    ),
    {%- set live.name = 'changed_' ~ loop.index %}
    {%- endfor %}

    versioned_keys as (
        select distinct {{ by_key }} from batch where `_lh_kind` in ('replace', 'update')
    ),

    -- rule 6: the earliest start per key, from earliest files or _fivetran_earliest rows;
    -- keys that are only deleted are not in it
    earliest as (
        select {{ lakehistory._columns(keys, 'e') }}, min(e.`_fivetran_start`) as `_lh_e`
        from batch as e
        left semi join versioned_keys as v on {{ lakehistory._join_on('e', 'v', keys) }}
        where (e.`_lh_has_earliest_file` and e.`_lh_kind` = 'earliest')
            or (not e.`_lh_has_earliest_file` and e.`_lh_kind` in ('replace', 'update') and e.`_fivetran_earliest`)
        group by all
    ),

    -- rule 7: rows of a key in E starting at or after its earliest start are deleted
    survivors as (
        select l.*, e.`_lh_e`
        from {{ live.name }} as l
        left join earliest as e on {{ lakehistory._join_on('l', 'e', keys) }}
        where e.`_lh_e` is null or l.`_fivetran_start` < e.`_lh_e`
    ),

    -- rule 8: the row still active of a key in E ends just before the earliest start
    closed as (
        select
            {{ lakehistory._columns(keys + plain_columns, 's') }},
            {%- if deleted_column %}
            case
                when s.`_lh_e` is not null and s.`_fivetran_active` and m.mark_deleted then true
                else s.{{ adapter.quote(deleted_column) }}
            end as {{ adapter.quote(deleted_column) }},
            {%- endif %}
            s.`_fivetran_start`,
            case
                when s.`_lh_e` is not null and s.`_fivetran_active` then s.`_lh_e` - interval 1 millisecond
                else s.`_fivetran_end`
            end as `_fivetran_end`,
            s.`_fivetran_active` and s.`_lh_e` is null as `_fivetran_active`,
            s.`_fivetran_synced`
        from survivors as s
        cross join batch_meta as m
    ),

    versions as (
        select
            b.*,
            max(case when b.`_lh_kind` = 'replace' then 1 end) over (
                partition by {{ lakehistory._columns(keys, 'b') }}
                order by b.`_fivetran_start`
                rows between unbounded preceding and 1 preceding
            ) as `_lh_replace_before`
        from batch as b
        where b.`_lh_kind` in ('replace', 'update')
    ),

    first_versions as (
        select {{ by_key }}, min(`_fivetran_start`) as `_lh_first_start`
        from versions
        group by all
    ),

    -- rule 10: the previous version of a key's first batch version is the latest surviving
    -- row with a smaller start, whatever its active flag
    base as (
        select
            {{ lakehistory._columns(keys, 's') }},
            max_by(
                named_struct({% for column in plain_columns %}'{{ column }}', s.{{ adapter.quote(column) }}{% if not loop.last %}, {% endif %}{% endfor %}),
                s.`_fivetran_start`
            ) as `_lh_base`
        from survivors as s
        inner join first_versions as f
            on {{ lakehistory._join_on('s', 'f', keys) }}
            and s.`_fivetran_start` < f.`_lh_first_start`
        group by all
    ),

    -- rules 9, 10: replace rows as sent; an update with no previous version is ignored
    kept as (
        select v.*, b.`_lh_base`
        from versions as v
        left join base as b on {{ lakehistory._join_on('v', 'b', keys) }}
        where v.`_lh_kind` = 'replace' or b.`_lh_base` is not null or v.`_lh_replace_before` is not null
    ),

    -- rule 10: an unmodified cell takes the value of the key's previous version (in the batch,
    -- else the base row); the deleted column is never inherited
    resolved as (
        select
            {{ lakehistory._columns(keys, 'k') }},
            {%- for column in plain_columns %}
            case
                when array_contains(k.`_lh_unmodified`, '{{ column }}') then coalesce(
                    last(
                        case when not array_contains(k.`_lh_unmodified`, '{{ column }}') then named_struct('v', k.{{ adapter.quote(column) }}) end,
                        true
                    ) over (
                        partition by {{ lakehistory._columns(keys, 'k') }}
                        order by k.`_fivetran_start`
                        rows between unbounded preceding and 1 preceding
                    ),
                    named_struct('v', k.`_lh_base`.{{ adapter.quote(column) }})
                ).v
                else k.{{ adapter.quote(column) }}
            end as {{ adapter.quote(column) }},
            {%- endfor %}
            {%- if deleted_column %}
            case
                when array_contains(k.`_lh_unmodified`, '{{ deleted_column }}') then false
                else k.{{ adapter.quote(deleted_column) }}
            end as {{ adapter.quote(deleted_column) }},
            {%- endif %}
            k.`_fivetran_start`,
            k.`_fivetran_end`,
            k.`_fivetran_active`,
            k.`_fivetran_synced`
        from kept as k
    ),

    after_versions as (
        select * from closed
        union all
        select * from resolved
    ),

    -- rule 11: a delete closes the key's active row at the delete time (the earliest delete wins)
    deletes as (
        select {{ by_key }}, min(`_fivetran_end`) as `_lh_deleted_at`
        from batch
        where `_lh_kind` = 'delete'
        group by all
    )

    select
        {{ lakehistory._columns(keys + plain_columns, 'a') }},
        {%- if deleted_column %}
        case
            when d.`_lh_deleted_at` is not null and a.`_fivetran_active` and m.mark_deleted then true
            else a.{{ adapter.quote(deleted_column) }}
        end as {{ adapter.quote(deleted_column) }},
        {%- endif %}
        a.`_fivetran_start`,
        case
            when d.`_lh_deleted_at` is not null and a.`_fivetran_active` then d.`_lh_deleted_at`
            else a.`_fivetran_end`
        end as `_fivetran_end`,
        a.`_fivetran_active` and d.`_lh_deleted_at` is null as `_fivetran_active`,
        a.`_fivetran_synced`
    from after_versions as a
    left join deletes as d on {{ lakehistory._join_on('a', 'd', keys) }}
    cross join batch_meta as m
{% endmacro %}


{#- The staged rows that carry data (not the batch marker, not schema changes). -#}
{% macro _row_kinds() %}
  {{- return("('replace', 'update', 'delete', 'earliest')") -}}
{% endmacro %}


{#- `a`.`x`, `a`.`y`, ... (or unqualified when alias is none) -#}
{% macro _columns(names, alias) %}
  {%- set quoted = [] -%}
  {%- for name in names -%}
    {%- do quoted.append((alias ~ '.' if alias else '') ~ adapter.quote(name)) -%}
  {%- endfor -%}
  {{- return(quoted | join(', ')) -}}
{% endmacro %}


{% macro _join_on(left, right, keys) %}
  {%- set pairs = [] -%}
  {%- for key in keys -%}
    {%- do pairs.append(left ~ '.' ~ adapter.quote(key) ~ ' = ' ~ right ~ '.' ~ adapter.quote(key)) -%}
  {%- endfor -%}
  {{- return(pairs | join(' and ')) -}}
{% endmacro %}


{% macro _batch_label(staged, ordinal) %}
  {%- set row = run_query("select `_lh_batch_id`, `_lh_source_table` from " ~ staged ~ " where `_lh_ordinal` = " ~ ordinal ~ " and `_lh_kind` = 'batch'").rows[0] -%}
  {{- return(row[0] ~ " of " ~ row[1]) -}}
{% endmacro %}
