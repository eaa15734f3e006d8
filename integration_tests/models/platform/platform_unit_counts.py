"""Platform proof (Python table model, run in dbt's own Spark session): variables per unit."""

from pyspark.sql import functions as F


def model(dbt, session):
    dbt.config(materialized="table")
    variables = dbt.ref("platform_variables")
    return variables.groupBy("unit").agg(F.count("*").alias("variable_count"))
