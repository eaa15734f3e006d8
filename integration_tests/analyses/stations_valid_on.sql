-- "Which stations were in service on date X?" (valid time, as the source says now): the Fivetran
-- versions whose [_fivetran_start, _fivetran_end] contains the instant (spec rule 18).
select
    station_id,
    native_id,
    network_id,
    publish,
    _fivetran_start,
    _fivetran_end
from {{ lakehistory.history(ref('meta_station_history'), 'as_of', "timestamp'2024-06-01 00:00:00'", clock='valid') }}
order by station_id
