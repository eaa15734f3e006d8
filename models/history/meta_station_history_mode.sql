-- meta_station as Fivetran's history mode shows it: every valid-time version, as of the latest transaction.
select * except (valid_from, valid_to)
from {{ ref('meta_station_history') }}
where valid_to = {{ lakehistory.open_version() }}
