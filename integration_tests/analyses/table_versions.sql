-- The current version (last transaction) of every history table of the project.
select
    table_name,
    version
from {{ lakehistory.current_versions() }}
order by table_name
