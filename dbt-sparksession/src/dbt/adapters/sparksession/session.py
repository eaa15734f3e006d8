"""The SparkSession that dbt's connections use, for code that needs the object itself."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession


def active_session(server_side_parameters: Mapping[str, str]) -> SparkSession:
    """Return the session dbt-spark's cursors run SQL on.

    dbt-spark builds its session with exactly this builder on every statement, and
    `getOrCreate` hands back the one already running (embedded or Spark Connect), so
    Python models, seeds and SQL share one session, one catalog and one set of temp views.
    """
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in server_side_parameters.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
