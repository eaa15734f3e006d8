-- Transaction 2 recorded id 2, below transaction 1's id 3; id 5 twice.
select * from values (1L, 1L), (3L, 1L), (2L, 2L), (5L, 3L), (5L, 3L) as t (site_hx_id, txn_id)
