-- Key 1: superseded, then current; key 2: deleted, gap, re-inserted one day later; key 3: a
-- version of one millisecond (start = end), then a delete.
select * from values
    (1, timestamp'2024-01-01 00:00:00', timestamp'2024-01-31 23:59:59.999', false, false),
    (1, timestamp'2024-02-01 00:00:00', timestamp'9999-12-31 23:59:59.999', true, false),
    (2, timestamp'2024-01-01 00:00:00', timestamp'2024-01-05 12:00:00', false, true),
    (2, timestamp'2024-01-06 12:00:00', timestamp'9999-12-31 23:59:59.999', true, false),
    (3, timestamp'2024-01-01 00:00:00', timestamp'2024-01-01 00:00:00', false, false),
    (3, timestamp'2024-01-01 00:00:00.001', timestamp'2024-03-01 00:00:00', false, true)
    as t (id, _fivetran_start, _fivetran_end, _fivetran_active, _fivetran_deleted)
