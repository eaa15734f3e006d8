"""meta_history_hx: every recorded change of meta_history, append-only, from its snapshot of daily extracts.

What the table is (key, source, foreign keys) is in its YAML: meta.lakehistory.hx.
"""

from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt,
        session,
        dbt.config.get("meta"),
        dbt.ref("meta_history_snapshot"),
        dbt.source("lakehistory", "lakehistory_transactions"),
        parents={"meta_station_hx": dbt.ref("meta_station_hx")},
    )
