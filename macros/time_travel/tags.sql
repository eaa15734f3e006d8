{#-
  Reading a tag (operations/tags.sql makes them): the version it names, as SQL, wherever a
  version goes.

      select * from {{ lakehistory.as_of(ref('meta_station_history'), lakehistory.tagged('paper-2024')) }}
      with {{ lakehistory.database_as_of("timestamp'2024-05-01'", txn=lakehistory.tagged_txn('paper-2024')) }}
      select ...

  A query over a tag that does not exist stops with an error that names it.
-#}
{% macro tagged(name) %}
  {{ return(adapter.dispatch('tagged', 'lakehistory')(name)) }}
{% endmacro %}

{% macro default__tagged(name) %}
  {%- set column = 'txn_id' if lakehistory.version_type() == 'integer' else 'started_at' -%}
  {{ return(lakehistory._tag_field(name, column)) }}
{% endmacro %}

{#- The tag's transaction id, as SQL: for the `txn` of hx_as_of and database_as_of. -#}
{% macro tagged_txn(name) %}
  {{ return(adapter.dispatch('tagged_txn', 'lakehistory')(name)) }}
{% endmacro %}

{% macro default__tagged_txn(name) %}
  {{ return(lakehistory._tag_field(name, 'txn_id')) }}
{% endmacro %}

{% macro _tag_field(name, column) %}
  {%- set tags = lakehistory.tags_relation() -%}
  {%- if execute and load_relation(tags) is none -%}
    {{ exceptions.raise_compiler_error("there is no tag " ~ name ~ ": the project has no tags yet (dbt run-operation lakehistory.tag)") }}
  {%- endif -%}
  {{ return("(select coalesce(max(`" ~ column ~ "`), raise_error(" ~ lakehistory._text('lakehistory: there is no tag ' ~ name)
      ~ ")) from " ~ tags ~ " where `tag` = " ~ lakehistory._text(name) ~ ")") }}
{% endmacro %}
