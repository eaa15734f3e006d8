-- Network 1: a version from Jan 10 (transaction 1) and one from Mar 1 (transaction 2); network 2
-- from Feb 1 (transaction 1).
select * from values
    (10L, 1, timestamp'2024-01-10 00:00:00', 1L),
    (11L, 1, timestamp'2024-03-01 00:00:00', 2L),
    (20L, 2, timestamp'2024-02-01 00:00:00', 1L)
    as t (network_hx_id, network_id, mod_time, txn_id)
