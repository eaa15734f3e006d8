{#- meta_history from its daily full extracts: one extract per run, oldest first; deletes as new records. -#}
{% snapshot meta_history_snapshot %}
{{
    config(
        unique_key='history_id',
        strategy='check',
        check_cols=['history_id', 'station_id', 'station_name', 'lon', 'lat', 'elev', 'sdate', 'edate', 'province', 'country', 'freq'],
        updated_at='extracted_at',
        hard_deletes='new_record',
        meta={'lakehistory': {'extract': true}},
        post_hook="{{ lakehistory.record_capture('meta_history') }}",
    )
}}

select * from {{ lakehistory.landing_extract('crmp_extracts', 'meta_history') }}
{% endsnapshot %}
