-- (a, 1): version 2 is missing; (a, 2): puuid points elsewhere; (b, 1): the first version has a
-- puuid; (b, 2): uuid u9 used twice.
select * from values
    ('a', 1, 1, 'u1', cast(null as string)),
    ('a', 1, 3, 'u3', 'u1'),
    ('a', 2, 1, 'u5', cast(null as string)),
    ('a', 2, 2, 'u6', 'u1'),
    ('b', 1, 1, 'u7', 'u6'),
    ('b', 2, 1, 'u9', cast(null as string)),
    ('b', 2, 2, 'u9', 'u9')
    as t (region, id, version, uuid, puuid)
