-- (a, 1): version 2 is missing; (a, 2): puuid points elsewhere; (b, 1): the first version has a
-- puuid; (b, 2): uuid u9 used twice; (c, 1): the re-CREATE after a DELETE has a puuid.
select * from values
    ('a', 1, 1, 'CREATE', 'u1', cast(null as string)),
    ('a', 1, 3, 'UPDATE', 'u3', 'u1'),
    ('a', 2, 1, 'CREATE', 'u5', cast(null as string)),
    ('a', 2, 2, 'UPDATE', 'u6', 'u1'),
    ('b', 1, 1, 'CREATE', 'u7', 'u6'),
    ('b', 2, 1, 'CREATE', 'u9', cast(null as string)),
    ('b', 2, 2, 'UPDATE', 'u9', 'u9'),
    ('c', 1, 1, 'CREATE', 'u10', cast(null as string)),
    ('c', 1, 2, 'DELETE', 'u11', 'u10'),
    ('c', 1, 3, 'CREATE', 'u12', 'u11')
    as t (region, id, version, action, uuid, puuid)
