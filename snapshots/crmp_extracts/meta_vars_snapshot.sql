{#- meta_vars from its daily full extracts: one extract per run, oldest first; deletes as new records. -#}
{% snapshot meta_vars_snapshot %}
{{
    config(
        unique_key='vars_id',
        strategy='check',
        check_cols=['vars_id', 'network_id', 'net_var_name', 'standard_name', 'cell_method', 'unit', 'precision', 'display_name'],
        updated_at='extracted_at',
        hard_deletes='new_record',
        meta={'lakehistory': {'extract': true}},
        post_hook="{{ lakehistory.record_capture('meta_vars') }}",
    )
}}

select * from {{ lakehistory.landing_extract('crmp_extracts', 'meta_vars') }}
{% endsnapshot %}
