{#-
  Custom incremental strategy `insert_new`: insert the rows whose unique key the table does not
  have yet; rows of known keys are left as they are. It shows the contract of the sparksession
  adapter's materialization: a custom strategy also owns the first build (existing_relation is none)
  and the full refresh (full_refresh is true, the table still there), which here rebuilds it.
-#}
{% macro get_incremental_insert_new_sql(arg_dict) %}
  {%- set target = arg_dict['target_relation'] -%}
  {%- set source = arg_dict['temp_relation'] -%}
  {%- set unique_key = arg_dict['unique_key'] -%}
  {%- if not unique_key -%}
    {{ exceptions.raise_compiler_error("Strategy insert_new needs a unique_key in the model's config.") }}
  {%- endif -%}
  {%- set keys = [unique_key] if unique_key is string else unique_key -%}

  {%- if arg_dict['existing_relation'] is none or arg_dict['full_refresh'] -%}
    create or replace table {{ target }} using delta as select * from {{ source }}
  {%- else -%}
    merge into {{ target }} as dest
    using {{ source }} as src
    on {% for key in keys %}dest.{{ adapter.quote(key) }} = src.{{ adapter.quote(key) }}{% if not loop.last %} and {% endif %}{% endfor %}
    when not matched then insert *
  {%- endif -%}
{% endmacro %}
