{#-
  Naksha's uuid layout (seed 002): a version-4, variant-1 uuid that is not random but names one
  object of one type, in one database, on one day. Bits, most significant first:

      object id bits 59..12 (48) | version 4 (4) | object id bits 11..0 (12)
      variant 0b10 (2) | year - 2000 (10) | month (4) | day (5) | object type (3) | database id (40)

  Object types: 0 = transaction, 1 = feature state. The database id is the project var
  `lakehistory_database_id` (0 to 2^40 - 1, default 0). The expression is written once, in
  Python (lakehistory.history.uuids), which writes the transactions' uuids with it too.

  Both macros return SQL expressions, so they run set-based inside any query.
-#}
{% macro naksha_uuid(object_id, at, object_type) %}
  {{ return(adapter.dispatch('naksha_uuid', 'lakehistory')(object_id, at, object_type)) }}
{% endmacro %}

{% macro default__naksha_uuid(object_id, at, object_type) %}
  {%- if not execute -%}{{ return('cast(null as string)') }}{%- endif -%}
  {{- return(lakehistory._engine('naksha_uuid', {'object_id': object_id, 'at': at, 'object_type': object_type})) -}}
{% endmacro %}


{#- The fields of a Naksha uuid, as a struct: object_id, year, month, day, object_type, database_id. -#}
{% macro naksha_uuid_fields(uuid) %}
  {{ return(adapter.dispatch('naksha_uuid_fields', 'lakehistory')(uuid)) }}
{% endmacro %}

{% macro default__naksha_uuid_fields(uuid) %}
  {%- set hex = "replace(" ~ uuid ~ ", '-', '')" -%}
  {%- set date_bits = "cast(conv(substr(" ~ hex ~ ", 17, 4), 16, 10) as bigint)" -%}
  {%- set day_bits = "cast(conv(substr(" ~ hex ~ ", 21, 2), 16, 10) as bigint)" -%}
  {{- return(
      "named_struct("
      ~ "'object_id', shiftleft(cast(conv(substr(" ~ hex ~ ", 1, 12), 16, 10) as bigint), 12)"
      ~ " | cast(conv(substr(" ~ hex ~ ", 14, 3), 16, 10) as bigint), "
      ~ "'year', 2000 + cast(shiftright(" ~ date_bits ~ ", 4) & 1023 as int), "
      ~ "'month', cast(" ~ date_bits ~ " & 15 as int), "
      ~ "'day', cast(shiftright(" ~ day_bits ~ ", 3) as int), "
      ~ "'object_type', cast(" ~ day_bits ~ " & 7 as int), "
      ~ "'database_id', cast(conv(substr(" ~ hex ~ ", 23, 10), 16, 10) as bigint))"
  ) -}}
{% endmacro %}


{#- The project's database id (var `lakehistory_database_id`), checked to fit its 40 bits. -#}
{% macro database_id() %}
  {{ return(adapter.dispatch('database_id', 'lakehistory')()) }}
{% endmacro %}

{% macro default__database_id() %}
  {%- set value = var('lakehistory_database_id', 0) -%}
  {%- if value is not number and not (value is string and value.isdigit()) -%}
    {{ exceptions.raise_compiler_error("var lakehistory_database_id must be an integer from 0 to 2^40 - 1, not " ~ value) }}
  {%- endif -%}
  {%- set value = value | int -%}
  {%- if value < 0 or value >= 1099511627776 -%}
    {{ exceptions.raise_compiler_error("var lakehistory_database_id must be an integer from 0 to 2^40 - 1, not " ~ value) }}
  {%- endif -%}
  {{- return(value) -}}
{% endmacro %}
