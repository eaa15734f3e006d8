select * from values
    ('a', 1, 1, 'u1', cast(null as string)),
    ('a', 1, 2, 'u2', 'u1'),
    ('a', 1, 3, 'u3', 'u2'),
    ('b', 1, 1, 'u4', cast(null as string))
    as t (region, id, version, uuid, puuid)
