{#-
  Giving up a sync, as a run-operation: for a sync some of whose tables will never apply it (its
  batch for them never lands), which otherwise holds the consistent cut (version_at, as_of_time,
  the default tag) before it for good.

      dbt run-operation lakehistory.abandon_sync --args '{sync_id: "2024-06-01T04:00"}'
      dbt run-operation lakehistory.abandon_sync --args '{sync_id: "2024-06-01T04:00", reason: "connector rerun as a new sync"}'

  It records a transaction row (operation = 'abandon') under the sync's id, with its author,
  time and reason: readers then see the sync with what the tables that applied it hold (undo it
  afterwards to take that back too), no table owes it any more, and a batch of it that lands
  later is refused, naming this command. Asked again, it says the sync was given up already.
-#}
{% macro abandon_sync(sync_id, reason=none, author=none) %}
  {{ return(adapter.dispatch('abandon_sync', 'lakehistory')(sync_id, reason, author)) }}
{% endmacro %}

{% macro default__abandon_sync(sync_id, reason=none, author=none) %}
  {%- if sync_id is none or sync_id | string | trim == '' -%}
    {{ exceptions.raise_compiler_error("abandon_sync: sync_id is required: the sync to give up, as its manifests name it") }}
  {%- endif -%}
  {%- set outcome = lakehistory._engine('abandon_sync', {
      'sync_id': sync_id | string, 'author': author, 'reason': reason}) -%}
  {%- if outcome['already_done'] -%}
    {{ log("abandon_sync: sync " ~ sync_id ~ " (transaction " ~ outcome['transaction'] ~ ") was given up already", info=true) }}
  {%- else -%}
    {{ log("abandon_sync: gave up sync " ~ sync_id ~ " (transaction " ~ outcome['transaction'] ~ "): applied by "
        ~ (outcome['applied'] | join(', ') or 'no table') ~ "; never applied by " ~ outcome['waiting'] | join(', '), info=true) }}
  {%- endif -%}
  {{ return(outcome['transaction']) }}
{% endmacro %}
