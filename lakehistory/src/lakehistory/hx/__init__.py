"""`_hx` history tables (seed 003, PCIC CRMP): every recorded change of a table, append-only.

A dbt Python model builds one `xxx_hx` table from a history table of the `fivetran_history`
strategy or from a dbt snapshot of daily extracts:

    from lakehistory.hx import build_hx

    def model(dbt, session):
        dbt.config(materialized="incremental", full_refresh=False)
        return build_hx(dbt, session, dbt.config.get("meta"), dbt.ref("meta_station_history"),
                        dbt.source("lakehistory", "lakehistory_transactions"),
                        parents={"meta_network_hx": dbt.ref("meta_network_hx")})

`dbt.source("lakehistory", "lakehistory_transactions")` is the project's transactions table (declare
that source with the var `lakehistory_transactions` as its identifier: README "Use it in your own dbt project"), and the
model's YAML says what the table is (`meta.lakehistory.hx`): the main table's name, its key,
the source model and its foreign keys (`columns`, `parent` hx model, `parent_columns`).

Columns: the main table's columns, `mod_time` (valid time of the change), `mod_user` (author of the
transaction that recorded it), `deleted` (the row records a deletion and carries the last values),
`xxx_hx_id` (primary key, increasing in recording order), one history foreign key `yyy_hx_id` per
foreign key, and `txn_id` (the lakehouse transaction that recorded the row).

What is appended. A transaction r changes what is known about some keys. For each such key, the
source gives its valid-time history as known after r: change points (a version starts; a deletion
takes effect) with their contents. The `_hx` rows recorded so far give their own reading: at any
time t, the row with the greatest (mod_time, id) at or before t. The rows appended for r are
exactly those that make the two readings agree: one row at every change point the `_hx` table
lacks or states differently, and one at every earlier `_hx` time whose reading r made wrong (a
retracted version gets a deletion row there). Re-delivered content appends nothing; a late version
appends one row with an early `mod_time` and a large id; nothing recorded is ever rewritten.

History foreign keys are resolved once, when a child row is appended: the parent `_hx` row of the
same key with the greatest (mod_time, id) at or before the child's `mod_time`. When the parent's
first recorded row is later than the child (a parent seen late, e.g. through a daily extract),
the parent's first row. NULL only when the foreign key is NULL or the parent key was never
recorded. `history_fk_sql` is that rule, for the build and for the `hx_resolved` macro alike.
"""

from lakehistory.hx.build import append_rows, build_hx
from lakehistory.hx.corrections import corrections
from lakehistory.hx.foreign_keys import history_fk_sql, resolve_foreign_key
from lakehistory.hx.model import ForeignKey, HxError, HxSpec, hx_table
from lakehistory.names import hx_id

__all__ = [
    "ForeignKey",
    "HxError",
    "HxSpec",
    "append_rows",
    "build_hx",
    "corrections",
    "history_fk_sql",
    "hx_id",
    "hx_table",
    "resolve_foreign_key",
]
