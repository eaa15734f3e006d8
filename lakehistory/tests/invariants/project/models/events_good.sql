-- 1 insert, 2 delete, 3 update_from, 4 update_to.
select * from values
    (1, 5L, 1), (1, 6L, 3), (1, 6L, 4), (2, 6L, 3), (2, 6L, 4), (2, 7L, 2)
    as t (id, _hist_trans_id, _hist_event)
