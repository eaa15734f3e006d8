{#- Per key, the versions are 1, 2, ..., n and each version's `puuid` is the `uuid` of the version
    before it, except on a CREATE (version 1, or the re-insert of a deleted key), whose `puuid` is
    NULL (seed 002): the chain has no hole, fork or stray link. uuids are unique. With
    `action=none`, only version 1 has no `puuid`. -#}
{% test version_chain(model, key, version='version', uuid='uuid', puuid='puuid', action='action') %}
  {{ return(adapter.dispatch('test_version_chain', 'lakehistory')(model, key, version, uuid, puuid, action)) }}
{% endtest %}

{% macro default__test_version_chain(model, key, version='version', uuid='uuid', puuid='puuid', action='action') %}
{%- set k = lakehistory._test_select(key) -%}
{%- set v = adapter.quote(version) -%}
{%- set u = adapter.quote(uuid) -%}
{%- set p = adapter.quote(puuid) -%}
{%- set creates = 'position = 1' ~ (' or ' ~ adapter.quote(action) ~ " <=> 'CREATE'" if action else '') %}
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
            when {{ creates }} then concat(': a CREATE has {{ puuid }} ', {{ p }})
            else concat(': {{ puuid }} ', coalesce({{ p }}, 'NULL'), ' is not the previous {{ uuid }} ', previous_uuid)
        end
    ) as problem
from (
    select
        {{ k }},
        {{ v }},
        {{ u }},
        {{ p }},
        {%- if action %}
        {{ adapter.quote(action) }},
        {%- endif %}
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
    or (({{ creates }}) and {{ p }} is not null)
    or (not ({{ creates }}) and not ({{ p }} <=> previous_uuid))
{% endmacro %}
