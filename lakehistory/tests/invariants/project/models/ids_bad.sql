-- 3 is missing, 4 is there twice, 0 is below the first id.
select * from values (0L), (1L), (2L), (4L), (4L) as t (txn_id)
