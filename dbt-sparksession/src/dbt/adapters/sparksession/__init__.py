"""dbt adapter plugin `sparksession`: dbt-spark's session method, plus what it lacks.

- Python models run in the very SparkSession dbt already uses (embedded or Spark Connect).
- Seeds load through a DataFrame: empty cells are NULL, quotes are data, nothing is pasted into SQL.
- Custom incremental strategies (`get_incremental_<name>_sql`) reach dbt-spark, from the root
  project or from any installed package, and may own the first build of their table.
"""

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.sparksession.connections import (
    SparkSessionConnectionManager,  # noqa: F401
    SparkSessionCredentials,
)
from dbt.adapters.sparksession.impl import SparkSessionAdapter
from dbt.include import sparksession

Plugin = AdapterPlugin(
    adapter=SparkSessionAdapter,  # type: ignore[arg-type]
    credentials=SparkSessionCredentials,
    include_path=sparksession.PACKAGE_PATH,
    dependencies=["spark"],
)
