{#- The test materialization of the `sparksession` adapter: dbt's own, plus: when a test fails, its
    first rows are logged, so `dbt test` says which keys and rows break the rule (lakehistory's
    invariant tests return the key columns and a `problem` text). Only a failing test runs the
    extra query, and it reads at most 10 rows. -#}
{%- materialization test, adapter='sparksession' -%}
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
