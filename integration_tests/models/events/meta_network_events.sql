-- Every event on meta_network (ESQL event history): inserts, deletes, and updates as update_from/update_to pairs.
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.event_history(ref('meta_network_history')) }}
