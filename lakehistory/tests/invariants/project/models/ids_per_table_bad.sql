-- 1 is there twice for table a, 3 is missing.
select * from values (1L, 'a'), (1L, 'a'), (1L, 'b'), (2L, 'b'), (4L, 'a') as t (txn_id, history_table)
