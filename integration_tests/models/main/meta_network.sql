-- meta_network as it is now (seed 003's main table, which people may correct with SQL): its current rows with mod_time and mod_user.
{{ config(materialized='incremental', incremental_strategy='main_table', unique_key=['network_id']) }}

select * from {{ lakehistory.hx_current(ref('meta_network_hx')) }}
