-- The pending change batches of obs_raw: typed, tokens resolved, validated.
select * from {{ lakehistory.landing_batches('crmp_landing', 'obs_raw') }}
