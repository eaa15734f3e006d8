"""The checks of the staged rows that span rows or batches (keys, versions, order)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehistory.names import START
from lakehistory.sql import q

from .spec import TableSpec, batch_error


def validate(staged: DataFrame, spec: TableSpec) -> None:
    """Raise BatchError for the first problems found in the staged rows (a bounded collect)."""
    problems = (
        staged.where(F.col("_lh_misuse").isNotNull() | F.col("_lh_bad_cell").isNotNull())
        .select("_lh_batch_id", "_lh_file", "_lh_row", F.coalesce("_lh_misuse", "_lh_bad_cell").alias("problem"))
        .orderBy("_lh_sequence", "_lh_file", "_lh_row")
        .limit(5)
        .collect()
    )
    if problems:
        lines = [f"file {p._lh_file}, data row {p._lh_row}: {p.problem}" for p in problems]
        raise batch_error(problems[0]._lh_batch_id, "; ".join(lines))
    key_columns = [F.col(q(k)) for k in spec.key]
    duplicates = (
        staged.where(F.col("_lh_kind").isin("replace", "update"))
        .groupBy("_lh_sequence", "_lh_batch_id", *key_columns, START)
        .agg(F.count("*").alias("n"), F.array_sort(F.collect_set("_lh_file")).alias("files"))
        .where("n > 1")
        .orderBy("_lh_sequence")
        .limit(1)
        .collect()
    )
    if duplicates:
        d = duplicates[0]
        key = ", ".join(f"{k}={d[k]!r}" for k in spec.key)
        raise batch_error(
            d._lh_batch_id,
            f"key ({key}) has {d.n} versions with the same _fivetran_start {d[START]} in {', '.join(d.files)}",
        )
