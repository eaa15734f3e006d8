"""lakehistory: full-fidelity history tables from change batches (dbt on Spark and Delta Lake)."""

from importlib import metadata

__version__ = metadata.version("lakehistory")  # the repository's VERSION, as installed
