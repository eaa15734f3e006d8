-- The transaction ids are 1, 2, ..., n with none missing, each once per table (a sync is one
-- transaction with a row per table it changed). A singular test, not one
-- on the source, so that it runs after every model that writes transactions (on a new lakehouse
-- the table does not exist before them).
-- depends_on: {{ ref('meta_network_history') }}, {{ ref('meta_station_history') }}, {{ ref('obs_raw_history') }}
-- depends_on: {{ ref('meta_history_snapshot') }}, {{ ref('meta_vars_snapshot') }}
{{ lakehistory.test_gap_free_ids(source('lakehistory', 'lakehistory_transactions'), 'txn_id', per='history_table') }}
