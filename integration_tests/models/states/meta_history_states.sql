-- Every state of every meta_history row (Naksha feature states), from the snapshot of its daily extracts.
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.feature_states(ref('meta_history_snapshot')) }}
