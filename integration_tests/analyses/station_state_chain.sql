-- The version chain of the station with the most states (Naksha feature states): each state's
-- action, version, uuid and previous uuid, in both clocks.
with busiest as (
    select station_id
    from {{ ref('meta_station_states') }}
    group by station_id
    order by count(*) desc, station_id
    limit 1
)

select
    s.station_id,
    s.version,
    s.action,
    s.native_id,
    s.network_id,
    s.uuid,
    s.puuid,
    s.author,
    s.updated_at,
    s.valid_updated_at
from {{ ref('meta_station_states') }} as s
inner join busiest as b
    on s.station_id = b.station_id
order by s.version
