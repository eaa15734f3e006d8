"""meta_station_hx: every recorded change of meta_station, append-only, from its history table (change batches).

What the table is (key, source, foreign keys) is in its YAML: meta.lakehistory.hx.
"""

from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt,
        session,
        dbt.config.get("meta"),
        dbt.ref("meta_station_history"),
        dbt.source("lakehistory", "lakehistory_transactions"),
        parents={"meta_network_hx": dbt.ref("meta_network_hx")},
    )
