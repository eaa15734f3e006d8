"""The checks of the staged rows that span rows or batches (keys, versions, order)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehistory.names import START
from lakehistory.sql import q

from .spec import TableSpec, batch_error


def validate(staged: DataFrame, spec: TableSpec) -> None:
    """Raise BatchError for the first problems found in the staged rows: bad cells and misused
    columns first, then a key given two versions of the same start in one batch. One bounded
    collect answers both (a Spark action less per staging than a query each)."""
    none = F.lit(None)
    key = F.struct(*(F.col(q(k)) for k in spec.key))
    cells = (
        staged.where(F.col("_lh_misuse").isNotNull() | F.col("_lh_bad_cell").isNotNull())
        .select(
            F.lit(0).alias("check"),
            "_lh_sequence",
            "_lh_batch_id",
            "_lh_file",
            "_lh_row",
            F.coalesce("_lh_misuse", "_lh_bad_cell").alias("problem"),
            none.cast("bigint").alias("n"),
            none.cast("array<string>").alias("files"),
            F.when(F.lit(False), key).alias("key"),
            none.cast(staged.schema[START].dataType).alias(START),
        )
        .orderBy("_lh_sequence", "_lh_file", "_lh_row")
        .limit(5)
    )
    duplicates = (
        staged.where(F.col("_lh_kind").isin("replace", "update"))
        .groupBy("_lh_sequence", "_lh_batch_id", key.alias("key"), START)
        .agg(F.count("*").alias("n"), F.array_sort(F.collect_set("_lh_file")).alias("files"))
        .where("n > 1")
        .orderBy("_lh_sequence")
        .limit(1)
        .select(
            F.lit(1).alias("check"),
            "_lh_sequence",
            "_lh_batch_id",
            none.cast("string").alias("_lh_file"),
            none.cast("bigint").alias("_lh_row"),
            none.cast("string").alias("problem"),
            "n",
            "files",
            "key",
            START,
        )
    )
    found = cells.unionByName(duplicates).collect()
    problems = sorted((p for p in found if p.check == 0), key=lambda p: (p._lh_sequence, p._lh_file, p._lh_row))
    if problems:
        lines = [f"file {p._lh_file}, data row {p._lh_row}: {p.problem}" for p in problems]
        raise batch_error(problems[0]._lh_batch_id, "; ".join(lines))
    for d in found:  # at most one
        values = ", ".join(f"{k}={v!r}" for k, v in zip(spec.key, d.key))
        raise batch_error(
            d._lh_batch_id,
            f"key ({values}) has {d.n} versions with the same _fivetran_start {d[START]} in {', '.join(d.files)}",
        )
