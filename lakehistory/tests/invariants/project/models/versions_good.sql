-- Transaction time, half-open [valid_from, valid_to): key 1's active row superseded by another in
-- transaction 3 (open: the largest bigint); key 2 removed in 2 and back in 4 (a gap: a delete);
-- key 3 open as NULL.
select * from values
    (1, 1L, 3L, true),
    (1, 3L, 9223372036854775807L, true),
    (2, 1L, 2L, true),
    (2, 4L, 9223372036854775807L, true),
    (3, 2L, cast(null as bigint), true)
    as t (id, valid_from, valid_to, _fivetran_active)
