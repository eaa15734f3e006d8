{#- Per key, the versions are 1, 2, ..., n and each version's `puuid` is the `uuid` of the version
    before it (NULL for version 1): the chain has no hole, fork or stray link. uuids are unique. -#}
{% test version_chain(model, key, version='version', uuid='uuid', puuid='puuid') %}
  {{ return(adapter.dispatch('test_version_chain', 'lakehistory')(model, key, version, uuid, puuid)) }}
{% endtest %}

{% macro default__test_version_chain(model, key, version='version', uuid='uuid', puuid='puuid') %}
{%- set k = lakehistory._test_select(key) -%}
{%- set v = adapter.quote(version) -%}
{%- set u = adapter.quote(uuid) -%}
{%- set p = adapter.quote(puuid) %}
select
    {{ k }},
    {{ v }},
    {{ u }},
    concat(
        {{ lakehistory._test_describe(key) }}, ', {{ version }}=', coalesce(cast({{ v }} as string), 'NULL'),
        case
            when {{ u }} is null then ': {{ uuid }} is NULL'
            when uses > 1 then concat(': {{ uuid }} ', {{ u }}, ' is used ', cast(uses as string), ' times')
            when {{ v }} is null or {{ v }} != position then concat(': expected {{ version }} ', cast(position as string))
            when position = 1 then concat(': the first version has {{ puuid }} ', {{ p }})
            else concat(': {{ puuid }} ', coalesce({{ p }}, 'NULL'), ' is not the previous {{ uuid }} ', previous_uuid)
        end
    ) as problem
from (
    select
        {{ k }},
        {{ v }},
        {{ u }},
        {{ p }},
        row_number() over (partition by {{ k }} order by {{ v }}) as position,
        lag({{ u }}) over (partition by {{ k }} order by {{ v }}) as previous_uuid,
        count(*) over (partition by {{ u }}) as uses
    from {{ model }}
) as chained
where
    {{ u }} is null
    or uses > 1
    or {{ v }} is null
    or {{ v }} != position
    or (position = 1 and {{ p }} is not null)
    or (position > 1 and not ({{ p }} <=> previous_uuid))
{% endmacro %}
