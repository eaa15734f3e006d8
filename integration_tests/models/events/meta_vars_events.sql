-- Every event on meta_vars (ESQL event history), from the snapshot of its daily extracts: each capture is a transaction.
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.event_history(ref('meta_vars_snapshot')) }}
