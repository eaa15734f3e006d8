-- meta_station in Fivetran history mode, with transaction time: every version of every row.
{{
    config(
        materialized='incremental',
        incremental_strategy='fivetran_history',
        unique_key=['station_id'],
        full_refresh=false,
    )
}}

select * from {{ ref('stg_crmp_landing__meta_station') }}
