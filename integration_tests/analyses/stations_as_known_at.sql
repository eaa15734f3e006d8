-- "What did the station list look like on date X, as we knew it then?" (transaction time). The
-- version is read once, so both tables are cut at the same transaction.
{% set version = lakehistory.version_at("timestamp'2030-01-01 00:00:00'") %}
select
    s.station_id,
    s.native_id,
    n.network_name,
    s.min_obs_time,
    s.max_obs_time
from {{ lakehistory.as_of(ref('meta_station_history'), version) }} as s
left join {{ lakehistory.as_of(ref('meta_network_history'), version) }} as n
    on s.network_id = n.network_id
    and n._fivetran_active
where s._fivetran_active
order by s.station_id
