-- Seed 003's canonical use case: a researcher downloaded observations on 2024-01-03 at 12:00 UTC
-- and, later, must rerun the analysis on the data as they were then. `database_as_of` defines
-- every table of the database as of that moment (one CTE per _hx table, named like the table),
-- so the original query runs unchanged below it.
with {{ lakehistory.database_as_of("timestamp'2024-01-03 12:00:00'") }}

select
    n.network_name,
    s.native_id,
    h.station_name,
    v.net_var_name,
    o.obs_time,
    o.datum
from obs_raw as o
inner join meta_history as h on o.history_id = h.history_id
inner join meta_station as s on h.station_id = s.station_id
inner join meta_network as n on s.network_id = n.network_id
inner join meta_vars as v on o.vars_id = v.vars_id
order by n.network_name, s.native_id, v.net_var_name, o.obs_time
