-- The pending change batches of meta_station: typed, tokens resolved, validated.
select * from {{ lakehistory.landing_batches('crmp_landing', 'meta_station') }}
