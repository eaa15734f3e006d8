"""obs_raw_hx: every recorded change of obs_raw, append-only, from its history table (change batches).

What the table is (key, source, foreign keys) is in its YAML: meta.lakehistory.hx.
"""

from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt,
        session,
        dbt.config.get("meta"),
        dbt.ref("obs_raw_history"),
        dbt.source("lakehistory", "lakehistory_transactions"),
        parents={"meta_history_hx": dbt.ref("meta_history_hx"), "meta_vars_hx": dbt.ref("meta_vars_hx")},
    )
