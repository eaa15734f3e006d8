{#- A history foreign key (the tested column, e.g. meta_network_hx_id) points to the version of the
    parent that was current at the child row's time: a row of `to` whose `columns` equal the
    child's foreign key `columns`, and the latest version of that key (by time, then id) at or
    before the child's `at` among the parent versions recorded by then (`transaction` at or
    before the child's).

    `first_version_fallback`: a child older than every version of its parent recorded by then
    (a parent seen late, e.g. through a daily extract) may point to the parent's first version,
    as lakehistory's `_hx` models do. With false such a row fails.

    The key NULL gives a NULL history foreign key; a NULL history foreign key with a key that has
    parent versions fails. -#}
{% test history_foreign_key(model, column_name, to, columns, parent_columns=none, field=none, at='mod_time', transaction='txn_id', first_version_fallback=true) %}
  {{ return(adapter.dispatch('test_history_foreign_key', 'lakehistory')(model, column_name, to, columns, parent_columns, field, at, transaction, first_version_fallback)) }}
{% endtest %}

{% macro default__test_history_foreign_key(model, column_name, to, columns, parent_columns=none, field=none, at='mod_time', transaction='txn_id', first_version_fallback=true) %}
{%- set child_key = lakehistory._test_columns(columns) -%}
{%- set parent_key = lakehistory._test_columns(parent_columns if parent_columns is not none else columns) -%}
{%- if child_key | length != parent_key | length -%}
  {{ exceptions.raise_compiler_error("history_foreign_key on " ~ model ~ "." ~ column_name ~ ": columns and parent_columns differ in length") }}
{%- endif -%}
{%- set fk = adapter.quote(column_name) -%}
{%- set parent_id = adapter.quote(field if field is not none else column_name) -%}
{%- set t = adapter.quote(at) -%}
{%- set txn = adapter.quote(transaction) -%}
{%- set key_null = [] -%}
{%- for i in range(child_key | length) -%}
  {%- do key_null.append('k' ~ i ~ ' is null') -%}
{%- endfor %}
with child as (
    select
        {%- for c in child_key %}
        {{ adapter.quote(c) }} as k{{ loop.index0 }},
        {%- endfor %}
        {{ t }} as child_at,
        {{ txn }} as child_txn,
        {{ fk }} as reference
    from {{ model }}
),

parent as (
    select
        {%- for c in parent_key %}
        {{ adapter.quote(c) }} as k{{ loop.index0 }},
        {%- endfor %}
        {{ t }} as parent_at,
        {{ txn }} as parent_txn,
        {{ parent_id }} as parent_id
    from {{ to }}
),

-- Per child row: the version it points to, and the parent versions of its key recorded by then:
-- the latest at or before the child's time, and the first.
judged as (
    select
        {%- for c in child_key %}
        c.k{{ loop.index0 }},
        {%- endfor %}
        c.child_at,
        c.child_txn,
        c.reference,
        first(pointed.k0 is not null) as found,
        first({{ lakehistory._join_on_columns('pointed', 'c', child_key | length) }}) as same_key,
        first(pointed.parent_at) as pointed_at,
        first(pointed.parent_id) as pointed_id,
        max(case when known.parent_at <= c.child_at then named_struct('at', known.parent_at, 'id', known.parent_id) end) as current_version,
        min(case when known.parent_id is not null then named_struct('at', known.parent_at, 'id', known.parent_id) end) as first_version
    from child as c
    left join parent as pointed on c.reference = pointed.parent_id
    left join parent as known on {{ lakehistory._join_on_columns('known', 'c', child_key | length) }} and known.parent_txn <= c.child_txn
    group by
        {%- for c in child_key %}
        c.k{{ loop.index0 }},
        {%- endfor %}
        c.child_at, c.child_txn, c.reference
)

select
    {%- for c in child_key %}
    k{{ loop.index0 }} as {{ adapter.quote(c) }},
    {%- endfor %}
    child_at as {{ t }},
    child_txn as {{ txn }},
    reference as {{ fk }},
    concat(
        {%- for c in child_key %}
        {{ lakehistory._text(c ~ '=') }}, coalesce(cast(k{{ loop.index0 }} as string), 'NULL'), ', ',
        {%- endfor %}
        {{ lakehistory._text(at ~ '=') }}, cast(child_at as string), {{ lakehistory._text(', ' ~ column_name ~ '=') }}, coalesce(cast(reference as string), 'NULL'), ': ',
        case
            when reference is null then 'no history foreign key, but the parent has versions'
            when {{ key_null | join(' or ') }} then 'a history foreign key without a foreign key'
            when not found then 'no parent row has this id'
            when not same_key then 'the parent row it points to is of another key'
            when pointed_at > child_at then 'the parent version it points to starts after this row'
            else concat('the parent version current at that time is ', cast(current_version.id as string), ' (from ', cast(current_version.at as string), ')')
        end
    ) as problem
from judged
where
    case
        when reference is null then not ({{ key_null | join(' or ') }}) and first_version is not null
        when {{ key_null | join(' or ') }} then true
        when not found or not same_key then true
        when pointed_at <= child_at then current_version is not null and named_struct('at', pointed_at, 'id', pointed_id) < current_version
        else not {{ 'true' if first_version_fallback else 'false' }}
            or current_version is not null
            or (first_version is not null and named_struct('at', pointed_at, 'id', pointed_id) > first_version)
    end
{% endmacro %}
