{#- Per key, the intervals neither overlap nor leave gaps: sorted by start, each one starts where
    the one before it ended. `intervals`:
      'closed_ms'  [start, end] to the millisecond (Fivetran's _fivetran_start/_fivetran_end): the
                   next start is the end + 1 ms.
      'half_open'  [start, end) (valid_from/valid_to, dbt_valid_from/dbt_valid_to): the next start
                   is the end. A NULL end is open.
    A gap is allowed only after a row for which `deleted` (a boolean SQL expression over the row)
    is true; without `deleted` every gap is read as a delete and only overlaps fail.
    `allow_zero_length` admits half-open rows whose start equals their end (a version that was
    never visible); they fail otherwise. -#}
{% test contiguous_intervals(model, key, start, end, intervals='closed_ms', deleted=none, allow_zero_length=false) %}
  {{ return(adapter.dispatch('test_contiguous_intervals', 'lakehistory')(model, key, start, end, intervals, deleted, allow_zero_length)) }}
{% endtest %}

{% macro default__test_contiguous_intervals(model, key, start, end, intervals='closed_ms', deleted=none, allow_zero_length=false) %}
{%- if intervals not in ('closed_ms', 'half_open') -%}
  {{ exceptions.raise_compiler_error("contiguous_intervals: intervals must be 'closed_ms' or 'half_open', not '" ~ intervals ~ "'") }}
{%- endif -%}
{%- set k = lakehistory._test_select(key) -%}
{%- set s = adapter.quote(start) -%}
{%- set e = adapter.quote(end) -%}
{%- set next_start = ('previous_end + interval 1 millisecond' if intervals == 'closed_ms' else 'previous_end') -%}
{%- set window = 'partition by ' ~ k ~ ' order by ' ~ s ~ ', ' ~ e %}
select
    {{ k }},
    {{ s }},
    {{ e }},
    concat(
        {{ lakehistory._test_describe(key) }}, ': [', cast({{ s }} as string), ', ',
        coalesce(cast({{ e }} as string), 'open'), '{{ "]" if intervals == "closed_ms" else ")" }}',
        case
            when position > 1 and (previous_end is null or {{ s }} < {{ next_start }})
                then concat(' overlaps the interval before it, which ends at ', coalesce(cast(previous_end as string), 'open'))
            when position > 1 and {{ s }} > {{ next_start }} and not previous_deleted
                then concat(' leaves a gap after the interval before it, which ends at ', cast(previous_end as string), ' and is not a delete')
            else ' has zero length'
        end
    ) as problem
from (
    select
        {{ k }},
        {{ s }},
        {{ e }},
        lag({{ e }}) over ({{ window }}) as previous_end,
        coalesce(lag({{ deleted if deleted is not none else 'true' }}) over ({{ window }}), false) as previous_deleted,
        row_number() over ({{ window }}) as position
    from {{ model }}
) as ordered
where
    (position > 1 and (previous_end is null or {{ s }} < {{ next_start }}))
    or (position > 1 and {{ s }} > {{ next_start }} and not previous_deleted)
    {%- if intervals == 'half_open' and not allow_zero_length %}
    or {{ s }} = {{ e }}
    {%- endif %}
{% endmacro %}
