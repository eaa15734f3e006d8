-- Platform proof (SQL table model): the seed's variables, typed and renamed.
with

source as (
    select * from {{ ref('platform_variables_seed') }}
),

renamed as (
    select
        -- ids
        cast(vars_id as bigint) as vars_id,
        -- descriptions
        vars_name,
        standard_name,
        cell_method,
        display_name,
        unit,
        -- numerics
        cast(precision as double) as precision,
        precision is not null as has_precision
    from source
)

select * from renamed
