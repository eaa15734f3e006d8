-- A transaction with a row per table it changed: 1 is a sync of tables a and b.
select * from values (1L, 'a'), (1L, 'b'), (2L, 'a'), (3L, 'b') as t (txn_id, history_table)
