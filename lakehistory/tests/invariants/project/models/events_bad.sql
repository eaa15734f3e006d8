-- Key 1 in transaction 6: an update_from without its update_to; key 2 in 6: two update_to.
select * from values
    (1, 5L, 1), (1, 6L, 3), (2, 6L, 3), (2, 6L, 4), (2, 6L, 4), (3, 6L, 3), (3, 6L, 4)
    as t (id, _hist_trans_id, _hist_event)
