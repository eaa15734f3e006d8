-- Each observation with the station metadata it was recorded against: the history foreign keys
-- lead from an obs_raw_hx row to the meta_history_hx and meta_vars_hx rows that were current at
-- its mod_time, and on to the station. Later corrections of the metadata do not change this
-- answer; `lakehistory.hx_resolved` gives the valid-time-correct parents as known now.
select
    o.obs_raw_id,
    o.mod_time,
    o.datum,
    o.deleted,
    h.station_name,
    h.lat,
    h.lon,
    s.native_id,
    v.net_var_name,
    v.unit
from {{ ref('obs_raw_hx') }} as o
left join {{ ref('meta_history_hx') }} as h on o.meta_history_hx_id = h.meta_history_hx_id
left join {{ ref('meta_station_hx') }} as s on h.meta_station_hx_id = s.meta_station_hx_id
left join {{ ref('meta_vars_hx') }} as v on o.meta_vars_hx_id = v.meta_vars_hx_id
order by o.obs_raw_hx_id
