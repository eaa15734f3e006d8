-- Every state of every obs_raw row (Naksha feature states): a version chain per key.
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.feature_states(ref('obs_raw_history')) }}
