-- At most one open version per variable in the platform snapshot.
select
    vars_id,
    count(*) as open_versions
from {{ ref('platform_variables_snapshot') }}
where dbt_valid_to is null
group by vars_id
having count(*) > 1
