"""Platform proof (Python incremental model, built-in merge): the latest definition of each
variable; an incremental run merges only rows that changed since the last run."""

from pyspark.sql import functions as F

DEFINITION = ["vars_name", "standard_name", "cell_method", "display_name", "unit", "precision"]


def model(dbt, session):
    dbt.config(materialized="incremental", incremental_strategy="merge", unique_key="vars_id")
    variables = dbt.ref("platform_variables").select(
        "vars_id", *DEFINITION, F.sha2(F.to_json(F.struct(*DEFINITION)), 256).alias("definition_hash")
    )
    if dbt.is_incremental:
        known = session.table(str(dbt.this)).select("vars_id", "definition_hash")
        variables = variables.join(known, ["vars_id", "definition_hash"], "left_anti")
    return variables
