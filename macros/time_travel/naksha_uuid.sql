{#-
  Naksha's uuid layout (seed 002): a version-4, variant-1 uuid that is not random but names one
  object of one type, in one database, on one day. Bits, most significant first:

      object id bits 59..12 (48) | version 4 (4) | object id bits 11..0 (12)
      variant 0b10 (2) | year - 2000 (10) | month (4) | day (5) | object type (3) | database id (40)

  Object types: 0 = transaction, 1 = feature state. The database id is the project var
  `lakehistory_database_id` (0 to 2^40 - 1, default 0). The seed's diagram writes the version
  nibble as `1000`; its text, its example uuid and RFC 4122 say 4 (`0100`), which is what we write.

  Both macros return SQL expressions, so they run set-based inside any query.
-#}
{% macro naksha_uuid(object_id, at, object_type) %}
  {{ return(adapter.dispatch('naksha_uuid', 'lakehistory')(object_id, at, object_type)) }}
{% endmacro %}

{% macro default__naksha_uuid(object_id, at, object_type) %}
  {%- set id = 'cast(' ~ object_id ~ ' as bigint)' -%}
  {%- set high = 'shiftleft(shiftright(' ~ id ~ ', 12), 16) | 16384 | (' ~ id ~ ' & 4095)' -%}
  {%- set low -%}
    shiftleft(2L, 62)
    | shiftleft(cast(year({{ at }}) - 2000 as bigint), 52)
    | shiftleft(cast(month({{ at }}) as bigint), 48)
    | shiftleft(cast(day({{ at }}) as bigint), 43)
    | shiftleft(cast({{ object_type }} as bigint), 40)
    | {{ lakehistory.database_id() }}
  {%- endset -%}
  {{- return("regexp_replace(lower(concat(lpad(hex(" ~ high ~ "), 16, '0'), lpad(hex(" ~ low ~ "), 16, '0'))),"
      ~ " '^(.{8})(.{4})(.{4})(.{4})(.{12})$', '$1-$2-$3-$4-$5')") -}}
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
