{#-
  Branches, as run-operations (write-audit-publish; lakehistory/operations/branches.py). A branch
  is the schema `<target schema>__<name>`: shallow clones of the history tables and snapshots of
  extracts as of one transaction, and the transactions table cut to it. Point a target at that
  schema to run and test on the branch; main's readers never see it.

      dbt run-operation lakehistory.create_branch --args '{name: fix_june, tag: paper-2024}'
      LAKEHISTORY_SCHEMA=analytics__fix_june dbt build      # a target whose schema is the branch's
      dbt run-operation lakehistory.publish_branch --args '{name: fix_june}'
      dbt run-operation lakehistory.drop_branch --args '{name: fix_june}'

  create_branch:  from `tag`, transaction `txn`, or the last visible transaction.
  publish_branch: the branch's transactions become one transaction of main, refused (nothing
                  changed) when main changed one of the branch's tables since the fork; then the
                  branch is dropped. Stopped, it is completed by running it again.
  drop_branch:    the branch's schema and tables dropped; main is not touched.
-#}
{% macro create_branch(name, tag=none, txn=none) %}
  {{ return(adapter.dispatch('create_branch', 'lakehistory')(name, tag, txn)) }}
{% endmacro %}

{% macro default__create_branch(name, tag=none, txn=none) %}
  {%- if tag is not none and txn is not none -%}
    {{ exceptions.raise_compiler_error("create_branch: give tag or txn, not both") }}
  {%- endif -%}
  {%- do lakehistory.ensure_transactions_table() -%}
  {%- set visible = run_query("select " ~ lakehistory.visible_txn_sql()).rows[0][0] | int -%}
  {%- if tag is not none -%}
    {%- set fork = run_query("select " ~ lakehistory.tagged_txn(tag | string)).rows[0][0] | int -%}
  {%- else -%}
    {%- set fork = (txn if txn is not none else visible) | int -%}
  {%- endif -%}
  {%- set branch = lakehistory._branch(name) -%}
  {%- set outcome = lakehistory._engine('create_branch', {'name': branch['name'], 'schema': branch['schema'],
      'branch_transactions': branch['branch_transactions'], 'tables': branch['tables'], 'fork': fork,
      'visible_txn_id': visible}) -%}
  {{ log("branch " ~ outcome['branch'] ~ ": schema " ~ outcome['schema'] ~ ", from transaction " ~ outcome['fork']
      ~ " (" ~ (outcome['tables'] | length) ~ " table(s) cloned). Run on it with a target whose schema is "
      ~ outcome['schema'] ~ ".", info=true) }}
  {{ return(outcome['fork']) }}
{% endmacro %}

{% macro publish_branch(name, author=none) %}
  {{ return(adapter.dispatch('publish_branch', 'lakehistory')(name, author)) }}
{% endmacro %}

{% macro default__publish_branch(name, author=none) %}
  {%- set branch = lakehistory._branch(name) -%}
  {%- set who = author if author is not none else run_query("select current_user()").rows[0][0] -%}
  {%- set outcome = lakehistory._engine('publish_branch', {'name': branch['name'], 'schema': branch['schema'],
      'branch_transactions': branch['branch_transactions'], 'tables': branch['tables'], 'author': who}) -%}
  {%- if outcome['already_done'] -%}
    {{ log("branch " ~ name ~ ": published already, as transaction " ~ outcome['transaction'], info=true) }}
  {%- endif -%}
  {%- for model, counts in outcome['tables'].items() -%}
    {{ log("branch " ~ name ~ ": " ~ model ~ " published in transaction " ~ outcome['transaction'] ~ " ("
        ~ counts['versions_closed'] ~ " version(s) closed, " ~ counts['versions_opened'] ~ " opened)", info=true) }}
  {%- endfor -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}

{% macro drop_branch(name) %}
  {{ return(adapter.dispatch('drop_branch', 'lakehistory')(name)) }}
{% endmacro %}

{% macro default__drop_branch(name) %}
  {%- set branch = lakehistory._branch(name) -%}
  {%- set dropped = lakehistory._engine('drop_branch', {'name': branch['name'], 'schema': branch['schema'],
      'branch_transactions': branch['branch_transactions']}) -%}
  {{ log("branch " ~ name ~ (": dropped" if dropped else ": there is no such branch; nothing to do"), info=true) }}
  {{ return(dropped) }}
{% endmacro %}


{#- Each branch of this lakehouse (a schema `<target schema>__<name>` whose creation says so): its
    fork, its creation, and whether it can be published now, with the reason when not. -#}
{% macro list_branches() %}
  {{ return(adapter.dispatch('list_branches', 'lakehistory')()) }}
{% endmacro %}

{% macro default__list_branches() %}
  {%- set prefix = (target.schema ~ '__') | lower -%}
  {%- set found = [] -%}
  {%- for row in run_query("show schemas") -%}
    {%- set name = row[0][prefix | length:] -%}
    {%- if (row[0] | lower).startswith(prefix) and '__' not in name -%}
      {%- do found.append(lakehistory._branch(name)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set shown = lakehistory._engine('list_branches', {'found': found}) -%}
  {%- if not shown -%}
    {{ log("no branches", info=true) }}
  {%- endif -%}
  {%- for b in shown -%}
    {{ log(b['branch'] ~ ": schema " ~ b['schema'] ~ ", from transaction " ~ b['fork'] ~ ", created "
        ~ b['created_at'] ~ "; " ~ ("can be published" if b['publishable'] else "cannot be published: " ~ b['reason']),
        info=true) }}
  {%- endfor -%}
  {{ return(shown) }}
{% endmacro %}


{#- The branch `name` as the engine takes it: its schema, its transactions table, and the tables
    it holds (each history model and snapshot of extracts, on main and on the branch). -#}
{% macro _branch(name) %}
  {%- set schema = target.schema ~ '__' ~ (name | string) -%}
  {%- set tables = [] -%}
  {%- set nodes = [] -%}
  {%- for node in lakehistory.history_nodes() -%}{%- do nodes.append((node, 'history')) -%}{%- endfor -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'snapshot'
      and (node.config.meta or {}).get('lakehistory', {}).get('extract') -%}
    {%- do nodes.append((node, 'snapshot')) -%}
  {%- endfor -%}
  {%- for node, kind in nodes -%}
    {%- if node.schema != target.schema -%}
      {{ exceptions.raise_compiler_error("branch " ~ name ~ ": " ~ node.name ~ " is in schema " ~ node.schema
          ~ ", and a branch holds the tables of the target's schema (" ~ target.schema ~ ") only") }}
    {%- endif -%}
    {%- do tables.append({'model': node.name, 'kind': kind,
        'target': api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) | string,
        'branch': api.Relation.create(database=node.database, schema=schema, identifier=node.alias) | string,
        'keys': lakehistory._as_list(node.config.get('unique_key')) if kind == 'history' else []}) -%}
  {%- endfor -%}
  {%- set transactions = lakehistory.transactions_relation() -%}
  {{ return({'name': name | string, 'schema': schema, 'tables': tables,
      'branch_transactions': transactions.incorporate(path={'schema': schema}) | string}) }}
{% endmacro %}
