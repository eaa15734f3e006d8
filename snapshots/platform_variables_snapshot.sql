{% snapshot platform_variables_snapshot %}
    {#- Platform proof (snapshot on Delta): every definition a variable has had. -#}
    {{
        config(
            unique_key='vars_id',
            strategy='check',
            check_cols='all',
            hard_deletes='new_record',
        )
    }}

    select * from {{ ref('platform_variables') }}
{% endsnapshot %}
