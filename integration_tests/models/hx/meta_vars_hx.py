"""meta_vars_hx: every recorded change of meta_vars, append-only, from its snapshot of daily extracts.

What the table is (key, source, foreign keys) is in its YAML: meta.lakehistory.hx.
"""

from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt,
        session,
        dbt.config.get("meta"),
        dbt.ref("meta_vars_snapshot"),
        dbt.source("lakehistory", "lakehistory_transactions"),
        parents={"meta_network_hx": dbt.ref("meta_network_hx")},
    )
