-- Stations and their networks as the project knew them after one transaction: a consistent cut of
-- two history tables at the same version. Change `version` to any transaction id of
-- lakehistory_transactions (or use version_at for an instant, see stations_as_known_at.sql).
-- In the demo every day records five transactions (two snapshot captures and the batches of
-- meta_network, meta_station and obs_raw), so 6 is early on the second day.
{% set version = 6 %}
select
    s.station_id,
    s.native_id,
    n.network_name,
    s.publish,
    s._fivetran_start as station_version_start
from {{ lakehistory.as_of(ref('meta_station_history'), version) }} as s
left join {{ lakehistory.as_of(ref('meta_network_history'), version) }} as n
    on s.network_id = n.network_id
    and n._fivetran_active
where s._fivetran_active
order by s.station_id
