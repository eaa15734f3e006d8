-- obs_raw in Fivetran history mode, with transaction time: every version of every observation.
{{
    config(
        materialized='incremental',
        incremental_strategy='fivetran_history',
        unique_key=['obs_raw_id'],
        full_refresh=false,
    )
}}

select * from {{ ref('stg_crmp_landing__obs_raw') }}
