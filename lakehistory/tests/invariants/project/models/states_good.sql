-- (a, 1): created, updated, deleted and created again (a CREATE has no puuid, seed 002).
select * from values
    ('a', 1, 1, 'CREATE', 'u1', cast(null as string)),
    ('a', 1, 2, 'UPDATE', 'u2', 'u1'),
    ('a', 1, 3, 'DELETE', 'u3', 'u2'),
    ('a', 1, 4, 'CREATE', 'u5', cast(null as string)),
    ('a', 1, 5, 'PURGE', 'u6', 'u5'),
    ('b', 1, 1, 'CREATE', 'u4', cast(null as string))
    as t (region, id, version, action, uuid, puuid)
