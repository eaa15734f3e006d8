select * from values
    (200L, 1, timestamp'2024-03-05 00:00:00', 3L, 10L),  -- stale: 11 was current and known
    (201L, 2, timestamp'2024-03-05 00:00:00', 3L, 10L),  -- a version of network 1
    (202L, 1, timestamp'2024-03-05 00:00:00', 3L, 99L),  -- no such parent row
    (203L, 1, timestamp'2024-03-05 00:00:00', 3L, cast(null as bigint)),  -- NULL, but network 1 exists
    (204L, cast(null as int), timestamp'2024-03-05 00:00:00', 3L, 20L),  -- set without a network
    (205L, 1, timestamp'2024-02-01 00:00:00', 3L, 11L)  -- 11 starts after the station
    as t (station_hx_id, network_id, mod_time, txn_id, network_hx_id)
