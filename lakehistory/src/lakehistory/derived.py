"""What the tables derived from a history table (`_hx`, events, feature states) share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import SparkSession

from lakehistory.sql import q


def take_new_columns(
    spark: SparkSession, table: str, columns: Sequence[str], types: Callable[[], Mapping[str, str]]
) -> list[str]:
    """Spec rule 17 ("add the column") for a derived table: each of `columns` that `table` lacks
    (Spark resolves names without regard to case, and so does this) is added to it after the
    columns it has, of its type in `types()` (read only when a column is new). Its rows from
    before read NULL in it, as the history table's versions from before do; no row changes.
    Returns the columns added."""
    have = {c.lower() for c in spark.table(table).columns}
    new = [c for c in columns if c.lower() not in have]
    if new:
        typed = types()
        spark.sql(f"alter table {table} add columns ({', '.join(f'{q(c)} {typed[c]}' for c in new)})")
    return new
