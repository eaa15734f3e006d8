{#- Written by `python -m lakehistory.macro_names` from lakehistory/src/lakehistory/names.py and the
    transactions layout: edit those, not this file (lakehistory/tests/test_door.py checks it). -#}
{% macro _names() %}
  {{ return({
    "fivetran_system": [
      "_fivetran_start",
      "_fivetran_end",
      "_fivetran_active",
      "_fivetran_synced"
    ],
    "start": "_fivetran_start",
    "end": "_fivetran_end",
    "active": "_fivetran_active",
    "synced": "_fivetran_synced",
    "valid_from": "valid_from",
    "valid_to": "valid_to",
    "removal": "removal",
    "txn_id": "txn_id",
    "history_system": [
      "_fivetran_start",
      "_fivetran_end",
      "_fivetran_active",
      "_fivetran_synced",
      "valid_from",
      "valid_to",
      "removal"
    ],
    "reserved": {
      "landing": [
        "_fivetran_start",
        "_fivetran_end",
        "_fivetran_active",
        "_fivetran_synced",
        "_fivetran_earliest"
      ],
      "history": [
        "_fivetran_start",
        "_fivetran_end",
        "_fivetran_active",
        "_fivetran_synced",
        "_fivetran_earliest",
        "valid_from",
        "valid_to",
        "removal"
      ],
      "extract": [
        "extracted_at",
        "extracted_by",
        "dbt_scd_id",
        "dbt_updated_at",
        "dbt_valid_from",
        "dbt_valid_to",
        "dbt_is_deleted"
      ],
      "hx": [
        "mod_time",
        "mod_user",
        "deleted",
        "txn_id"
      ],
      "events": [
        "_hist_trans_id",
        "_hist_user",
        "_hist_event",
        "_hist_time",
        "_hist_valid_time"
      ],
      "states": [
        "action",
        "version",
        "uuid",
        "puuid",
        "txn",
        "txn_id",
        "author",
        "app_id",
        "created_at",
        "updated_at",
        "rtcts",
        "rtuts",
        "valid_created_at",
        "valid_updated_at",
        "deleted",
        "xyz"
      ]
    },
    "end_of_time": {
      "integer": "9223372036854775807",
      "timestamp": "timestamp'9999-12-31 23:59:59.999999'"
    },
    "fivetran_end_of_time": "timestamp'9999-12-31 23:59:59.999'",
    "transaction_columns": [
      "txn_id",
      "txn_uuid",
      "operation",
      "source_table",
      "history_table",
      "batch_id",
      "batch_sequence",
      "author",
      "app_id",
      "commit_message",
      "started_at",
      "committed_at",
      "rows_in",
      "versions_opened",
      "versions_closed",
      "rows_overlap_deleted",
      "rows_purged",
      "delta_version",
      "sync_id",
      "commit_json",
      "schema_changes",
      "parts",
      "row_index",
      "database_id",
      "visible_at"
    ]
  }) }}
{% endmacro %}
