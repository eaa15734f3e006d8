-- The daily extract of meta_vars its snapshot captures next (the oldest not captured yet), typed and validated.
{{ config(materialized='ephemeral') }}

select * from {{ lakehistory.landing_extract('crmp_extracts', 'meta_vars', 'meta_vars_snapshot') }}
