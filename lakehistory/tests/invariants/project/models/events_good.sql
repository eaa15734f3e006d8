-- 1 insert, 2 delete, 3 update_from, 4 update_to; key 2 is updated twice in transaction 6.
select * from values
    (1, 5L, 1, timestamp'2024-01-01 01:00:00'), (1, 6L, 3, timestamp'2024-01-01 02:00:00'), (1, 6L, 4, timestamp'2024-01-01 02:00:00'),
    (2, 6L, 3, timestamp'2024-01-01 01:00:00'), (2, 6L, 4, timestamp'2024-01-01 01:00:00'), (2, 6L, 3, timestamp'2024-01-01 02:00:00'), (2, 6L, 4, timestamp'2024-01-01 02:00:00'), (2, 7L, 2, timestamp'2024-01-01 03:00:00')
    as t (id, _hist_trans_id, _hist_event, _hist_valid_time)
