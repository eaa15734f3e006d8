-- Corrections: station versions the project once held and later replaced or removed, with the
-- transaction that made each change (transaction time, SQL:2011 FROM ... TO over all of it).
select
    s.station_id,
    s._fivetran_start,
    s.valid_from,
    s.valid_to as replaced_by_txn,
    t.batch_id,
    t.author,
    t.committed_at
from {{ lakehistory.history(ref('meta_station_history'), 'from_to', 0, lakehistory.current_version(ref('meta_station_history'))) }} as s
inner join {{ lakehistory.transactions_relation() }} as t
    on s.valid_to = t.txn_id
order by s.station_id, s._fivetran_start, s.valid_from
