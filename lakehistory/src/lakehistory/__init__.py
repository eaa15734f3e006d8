"""lakehistory: full-fidelity history tables from change batches (dbt on Spark and Delta Lake)."""

__version__ = "0.1.0"
