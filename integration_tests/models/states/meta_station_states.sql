-- Every state of every meta_station row (Naksha feature states): a version chain per key.
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.feature_states(ref('meta_station_history')) }}
