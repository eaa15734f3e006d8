"""The SparkSession that dbt's connections use, for code that needs the object itself."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping

from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import SparkSession

CLASS_PATH = "spark.driver.extraClassPath"


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


def refuse_missing_jars(class_path: str) -> None:
    """The JVM skips a class path entry that does not exist without a word, and the session then
    fails later on a class it lacks (S3A's file system, Delta's catalog). Name the entries instead."""
    entries = [e.strip() for e in class_path.split(os.pathsep) if e.strip()]
    absent = [e for e in entries if not (glob.glob(e) if e.endswith("*") else os.path.exists(e))]
    if absent:
        raise DbtRuntimeError(
            f"The profile's {CLASS_PATH} names jars that are not there: {', '.join(absent)}."
            " With lakehistory's profile, `python -m lakehistory.runtime.jars ensure` caches Delta's jars, and"
            " `python -m lakehistory.runtime.jars ensure --object-store` Hadoop's S3A connector too (for an"
            " s3a:// warehouse or landing)."
        )
