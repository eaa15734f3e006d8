select * from values (1L), (2L), (3L) as t (txn_id)
