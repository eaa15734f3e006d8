-- Key 1: two active rows that also overlap; key 2: active but ended; key 3: inactive at the open
-- end; key 4: a gap that is not a delete; key 5: ends before it starts.
select * from values
    (1, timestamp'2024-01-01 00:00:00', timestamp'9999-12-31 23:59:59.999', true, false),
    (1, timestamp'2024-02-01 00:00:00', timestamp'9999-12-31 23:59:59.999', true, false),
    (2, timestamp'2024-01-01 00:00:00', timestamp'2024-01-31 23:59:59.999', true, false),
    (3, timestamp'2024-01-01 00:00:00', timestamp'9999-12-31 23:59:59.999', false, false),
    (4, timestamp'2024-01-01 00:00:00', timestamp'2024-01-10 00:00:00', false, false),
    (4, timestamp'2024-01-20 00:00:00', timestamp'9999-12-31 23:59:59.999', true, false),
    (5, timestamp'2024-01-02 00:00:00', timestamp'2024-01-01 00:00:00', false, true)
    as t (id, _fivetran_start, _fivetran_end, _fivetran_active, _fivetran_deleted)
