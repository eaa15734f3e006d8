{#- dbt's own test materialization, plus: when a test fails, the first rows it returned are logged,
    so `dbt test` says which keys and rows break the rule (lakehistory's tests return the key
    columns and a `problem` text). Applies where lakehistory is the root project; a project that
    installs lakehistory keeps dbt's materialization and can read the rows with --store-failures. -#}
{%- materialization test, default -%}
  {%- set relations = dbt.materialization_test_default() -%}
  {%- set result = load_result('main') -%}
  {%- set failures = result['table'].rows[0][0] if result and result['table'] and result['table'].rows else 0 -%}
  {%- if execute and failures and failures > 0 -%}
    {%- set shown = 10 -%}
    {%- set sample = run_query('select * from (' ~ sql ~ ') as failing limit ' ~ shown) -%}
    {%- set lines = [] -%}
    {%- for row in sample.rows -%}
      {%- if 'problem' in sample.column_names -%}
        {%- do lines.append('  ' ~ row['problem']) -%}
      {%- else -%}
        {%- set cells = [] -%}
        {%- for name in sample.column_names -%}
          {%- do cells.append(name ~ '=' ~ row[name]) -%}
        {%- endfor -%}
        {%- do lines.append('  ' ~ (cells | join(', '))) -%}
      {%- endif -%}
    {%- endfor -%}
    {{ log(model['name'] ~ ' found ' ~ failures ~ ' failing row(s)' ~ (', the first ' ~ shown if failures > shown else '') ~ ':\n' ~ (lines | join('\n')), info=True) }}
  {%- endif -%}
  {{ return(relations) }}
{%- endmaterialization -%}
