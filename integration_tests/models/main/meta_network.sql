-- meta_network as it is now (seed 003's main table): its current rows with mod_time and mod_user.
select * from {{ lakehistory.hx_current(ref('meta_network_hx')) }}
