-- obs_raw as Fivetran's history mode shows it: every valid-time version, as of the latest transaction.
select * from {{ lakehistory.current(ref('obs_raw_history')) }}
