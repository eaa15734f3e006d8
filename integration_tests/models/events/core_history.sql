-- Which tables each transaction touched, and how (ESQL `_core.history`).
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.core_history({
    'meta_network': ref('meta_network_events'),
    'meta_station': ref('meta_station_events'),
    'obs_raw': ref('obs_raw_events'),
    'meta_history': ref('meta_history_events'),
    'meta_vars': ref('meta_vars_events'),
}) }}
