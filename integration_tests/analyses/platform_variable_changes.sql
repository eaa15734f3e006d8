-- Every definition change the platform snapshot has recorded, newest first.
select
    vars_id,
    vars_name,
    precision,
    dbt_valid_from as valid_from,
    dbt_valid_to as valid_to
from {{ ref('platform_variables_snapshot') }}
order by dbt_valid_from desc, vars_id asc
