select * from values (1L, 1L), (2L, 1L), (3L, 2L), (4L, 5L) as t (site_hx_id, txn_id)
