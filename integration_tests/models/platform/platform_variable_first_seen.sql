-- Platform proof (custom incremental strategy `insert_new`): the first definition seen of
-- each variable; later changes of a known variable are not applied, new variables are.
{{
    config(
        materialized='incremental',
        incremental_strategy='insert_new',
        unique_key='vars_id',
    )
}}

select
    vars_id,
    vars_name,
    unit,
    precision
from {{ ref('platform_variables') }}
