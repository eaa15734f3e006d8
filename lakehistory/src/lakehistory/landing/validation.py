"""The checks of the staged rows that span rows or batches (keys, versions, order)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehistory.names import START
from lakehistory.sql import q

from .spec import TableSpec, batch_error


def validate(staged: DataFrame, spec: TableSpec, table_exists: bool = True) -> None:
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
    if not table_exists:
        _check_updates_of_a_new_table(staged, spec)
    if duplicates:
        d = duplicates[0]
        key = ", ".join(f"{k}={d[k]!r}" for k in spec.key)
        raise batch_error(
            d._lh_batch_id,
            f"key ({key}) has {d.n} versions with the same _fivetran_start {d[START]} in {', '.join(d.files)}",
        )


def _check_updates_of_a_new_table(staged: DataFrame, spec: TableSpec) -> None:
    """An update changes a row the table holds. Before the table's first batch is applied there
    is none, so an update row of the first batch needs an earlier replace row of its key in that
    batch; otherwise the batch was meant for a table that does not exist here."""
    key_columns = [F.col(q(k)) for k in spec.key]
    before = Window.partitionBy(*key_columns).orderBy(START).rowsBetween(Window.unboundedPreceding, -1)
    orphans = (
        staged.where((F.col("_lh_ordinal") == 1) & F.col("_lh_kind").isin("replace", "update"))
        .withColumn("_lh_replaced_before", F.max((F.col("_lh_kind") == "replace").cast("int")).over(before))
        .where((F.col("_lh_kind") == "update") & F.coalesce(F.col("_lh_replaced_before"), F.lit(0)).eqNullSafe(0))
        .select("_lh_batch_id", "_lh_file", "_lh_row", *key_columns)
        .orderBy("_lh_file", "_lh_row")
        .limit(1)
        .collect()
    )
    if orphans:
        o = orphans[0]
        key = ", ".join(f"{k}={o[k]!r}" for k in spec.key)
        raise batch_error(
            o._lh_batch_id,
            f"file {o._lh_file}, data row {o._lh_row}: an update of key ({key}), but table {spec.table} does not "
            "exist yet and the batch brings no earlier full row (replace) of that key",
        )
