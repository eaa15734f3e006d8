-- Key 1 in transaction 6: an update_from without its update_to; key 2 in 6: two update_to at one
-- valid time. Key 3's two updates in 6, at two valid times, are fine.
select * from values
    (1, 5L, 1, timestamp'2024-01-01 01:00:00'), (1, 6L, 3, timestamp'2024-01-01 02:00:00'), (2, 6L, 3, timestamp'2024-01-01 02:00:00'), (2, 6L, 4, timestamp'2024-01-01 02:00:00'), (2, 6L, 4, timestamp'2024-01-01 02:00:00'),
    (3, 6L, 3, timestamp'2024-01-01 01:00:00'), (3, 6L, 4, timestamp'2024-01-01 01:00:00'), (3, 6L, 3, timestamp'2024-01-01 02:00:00'), (3, 6L, 4, timestamp'2024-01-01 02:00:00')
    as t (id, _hist_trans_id, _hist_event, _hist_valid_time)
