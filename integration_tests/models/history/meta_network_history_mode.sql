-- meta_network as Fivetran's history mode shows it: every valid-time version, as of the latest transaction.
select * from {{ lakehistory.current(ref('meta_network_history')) }}
