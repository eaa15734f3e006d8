-- What the last transaction that changed station metadata did: the tables it touched (core_history)
-- and, column by column, what changed in meta_station, by whom (lakehistory.column_changes).
with last_txn as (
    select max(trans_id) as trans_id
    from {{ ref('core_history') }}
    where table_name = 'meta_station'
)

select
    c.changed_at,
    c.txn_id,
    c.valid_time,
    c.user_name,
    c.action,
    c.station_id,
    c.column_name,
    c.old_value,
    c.new_value
from {{ lakehistory.column_changes(ref('meta_station_events')) }} as c
inner join last_txn as l
    on c.txn_id = l.trans_id
order by c.station_id, c.valid_time, c.column_name
