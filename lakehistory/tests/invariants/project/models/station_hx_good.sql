select * from values
    (100L, 1, timestamp'2024-02-01 00:00:00', 2L, 10L),  -- current: 10
    (101L, 1, timestamp'2024-03-05 00:00:00', 3L, 11L),  -- current: 11
    (102L, 1, timestamp'2024-03-05 00:00:00', 1L, 10L),  -- recorded in 1, before 11 was known
    (103L, 1, timestamp'2024-01-01 00:00:00', 3L, 10L),  -- older than the network: its first version
    (104L, 2, timestamp'2024-03-05 00:00:00', 3L, 20L),
    (105L, cast(null as int), timestamp'2024-03-05 00:00:00', 3L, cast(null as bigint)),
    (106L, 3, timestamp'2024-03-05 00:00:00', 3L, cast(null as bigint))  -- network 3 never recorded
    as t (station_hx_id, network_id, mod_time, txn_id, network_hx_id)
