-- Key 1: two active rows that share versions 3 and 4 (half-open overlap); key 2: a row that was
-- never visible (valid_from = valid_to); key 3: an open NULL end followed by another row.
select * from values
    (1, 1L, 5L, true),
    (1, 3L, 9223372036854775807L, true),
    (2, 2L, 2L, true),
    (2, 2L, 9223372036854775807L, true),
    (3, 1L, cast(null as bigint), true),
    (3, 4L, cast(null as bigint), true)
    as t (id, valid_from, valid_to, _fivetran_active)
