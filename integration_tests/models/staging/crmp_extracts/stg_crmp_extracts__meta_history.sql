-- The daily extract of meta_history its snapshot captures next (the oldest not captured yet), typed and validated.
{{ config(materialized='ephemeral') }}

select * from {{ lakehistory.landing_extract('crmp_extracts', 'meta_history', 'meta_history_snapshot') }}
