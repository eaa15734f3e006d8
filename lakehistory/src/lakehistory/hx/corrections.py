"""The diff: the rows to append so that the `_hx` reading agrees with the source's."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehistory.hx.model import col
from lakehistory.names import DELETED, MOD_TIME
from lakehistory.sql import q


def _content_equal(a: str, b: str, cols: Sequence[str]) -> Column:
    """Two states (structs, NULL = no row) say the same: both absent or deleted, or both live with
    equal values (NULL equal to NULL)."""
    a_gone = F.col(a).isNull() | F.col(f"{a}.c_deleted")
    b_gone = F.col(b).isNull() | F.col(f"{b}.c_deleted")
    same_values = reduce(
        lambda x, y: x & y, [F.col(f"{a}.{q(c)}").eqNullSafe(F.col(f"{b}.{q(c)}")) for c in cols], F.lit(True)
    )
    return F.coalesce((a_gone & b_gone) | (~a_gone & ~b_gone & same_values), F.lit(False))


def corrections(points: DataFrame, hx_rows: DataFrame, key: Sequence[str], cols: Sequence[str]) -> DataFrame:
    """Rows to append so that the `_hx` reading of `hx_rows` (key, mod_time, deleted, columns, _ord)
    equals the source reading of `points` (key, t, c_deleted, columns) on every key of `points`."""
    data = [c for c in cols if c not in key]
    state = [F.col("c_deleted"), *[col(c) for c in data]]
    f = points.select(*[col(k) for k in key], "t", F.struct(*state).alias("f"))
    # The _hx reading at a time: its latest-recorded row there (greatest _ord).
    g = (
        hx_rows.select(
            *[col(k) for k in key],
            F.col(MOD_TIME).alias("t"),
            "_ord",
            F.struct(F.col(DELETED).alias("c_deleted"), *[col(c) for c in data]).alias("g"),
        )
        .groupBy(*[col(k) for k in key], "t")
        .agg(F.max_by("g", "_ord").alias("g"))
    )
    both = f.join(g, [*key, "t"], "full_outer")
    upto = (
        Window.partitionBy(*[col(k) for k in key])
        .orderBy("t")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    both = both.withColumn("f_state", F.last("f", ignorenulls=True).over(upto)).withColumn(
        "g_state", F.last("g", ignorenulls=True).over(upto)
    )
    same = _content_equal("f_state", "g_state", data)
    # At a change point the _hx table needs a row of its own; elsewhere only the reading must agree.
    needed = F.when(F.col("f").isNotNull(), F.col("g").isNull() | ~same).otherwise(~same)
    live = F.col("f_state").isNotNull() & ~F.col("f_state.c_deleted")
    carried = F.when(F.col("f_state").isNotNull(), F.col("f_state")).otherwise(
        F.col("g_state")
    )  # a retraction carries what it retracts
    return both.where(needed).select(
        *[col(k) for k in key],
        *[carried[c].alias(c) for c in data],
        F.col("t").alias(MOD_TIME),
        (~live).alias(DELETED),
    )
