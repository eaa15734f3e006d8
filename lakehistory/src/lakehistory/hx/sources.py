"""The sources of an `_hx` table: which transactions recorded what, and the valid-time history
(change points) as known after each: a `fivetran_history` table or a dbt snapshot of extracts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehistory.history.transactions import moved_rows
from lakehistory.hx.model import HxError, HxSpec, col, hx_table
from lakehistory.transaction_parts import each_part


@dataclass(frozen=True)
class Recording:
    txn_id: int
    at: object  # the source's version value of the transaction: its id, its time, or a capture time
    author: str | None


class Source:
    """A history source: which transactions recorded what, and the valid-time history as of each."""

    def __init__(self, frame: DataFrame, spec: HxSpec, name: str):
        self.frame, self.spec, self.name = frame, spec, name

    def recordings(self, transactions: DataFrame, after_txn: int) -> list[Recording]:
        raise NotImplementedError

    def recorded(self, transactions: DataFrame, operations: Sequence[str], after_txn: int) -> list[Any]:
        """This source's transactions of `operations` after `after_txn` that moved a row (others
        have nothing to record), in id order: one row each.

        A transaction names its history table as `schema.table`; the `_hx` model knows its source
        by name only, and that source may live in another schema (custom schemas), so the two
        are matched by table name, and two tables of that name in one transactions table are
        refused rather than mixed."""
        table = F.lower("history_table")
        name = self.name.lower()
        rows = (
            transactions.where(
                ((table == F.lit(name)) | table.endswith(F.lit("." + name)))
                & F.col("operation").isin(*operations)
                & (F.col("txn_id") > F.lit(after_txn))
                & F.expr(moved_rows())
            )
            .select("txn_id", "started_at", "batch_id", "author", "history_table")
            .orderBy("txn_id")
            .collect()  # one row per transaction, not per data row
        )
        if len(tables := sorted({r.history_table.lower() for r in rows})) > 1:
            raise HxError(
                f"{hx_table(self.spec.table)}: its source {self.name} could be any of {', '.join(tables)}"
                " (one transactions table, two history tables of that name); give the source model an"
                " alias no other history table of the project has"
            )
        return rows

    def touched(self, rows: DataFrame, rec: Recording) -> DataFrame:
        """The rows of `rows` that recording `rec` opened or closed."""
        raise NotImplementedError

    def changed(self, pending: Sequence[Recording]) -> DataFrame:
        """Rows opened or closed by the `pending` recordings."""
        raise NotImplementedError

    def change_points(self, rows: DataFrame, rec: Recording) -> DataFrame:
        """(key..., t, c_deleted, columns...) as known after `rec`, from `rows` (all rows of some keys)."""
        raise NotImplementedError


class FivetranSource(Source):
    """A history table of the `fivetran_history` strategy: rows open in transaction time at version
    v are valid_from <= v < valid_to (valid_to NULL or the max while open)."""

    def __init__(self, frame: DataFrame, spec: HxSpec, name: str):
        super().__init__(frame, spec, name)
        self.by_time = dict(frame.dtypes)["valid_from"] == "timestamp"

    def recordings(self, transactions: DataFrame, after_txn: int) -> list[Recording]:
        # a revert (lakehistory.revert, .undo) changes the valid-time history as a batch does
        rows = self.recorded(transactions, ("batch", "edit", "revert"), after_txn)
        return [Recording(r.txn_id, r.started_at if self.by_time else r.txn_id, r.author) for r in rows]

    def _open_at(self, at: object) -> Column:
        return (F.col("valid_from") <= F.lit(at)) & (F.col("valid_to").isNull() | (F.col("valid_to") > F.lit(at)))

    def touched(self, rows: DataFrame, rec: Recording) -> DataFrame:
        return rows.where((F.col("valid_from") == F.lit(rec.at)) | (F.col("valid_to") == F.lit(rec.at)))

    def changed(self, pending: Sequence[Recording]) -> DataFrame:
        ats = [F.lit(r.at) for r in pending]
        return self.frame.where((F.col("valid_from") >= F.lit(pending[0].at)) | F.col("valid_to").isin(*ats))

    def change_points(self, rows: DataFrame, rec: Recording) -> DataFrame:
        key, cols = list(self.spec.key), list(self.spec.columns)
        known = rows.where(self._open_at(rec.at))
        by_start = Window.partitionBy(*[col(k) for k in key]).orderBy("_fivetran_start")
        known = known.withColumn("_next_start", F.lead("_fivetran_start").over(by_start))
        starts = known.select(
            *[col(c) for c in cols], F.col("_fivetran_start").alias("t"), F.lit(False).alias("c_deleted")
        )
        # An inactive version that ends before the next one starts was deleted (rule 2: end = the
        # delete time, inclusive): the deletion takes effect at end + 1 ms, half-open like every
        # other change. A version that ends at or after the next start (a late version leaves the
        # one before it overlapping, rule 8) is superseded by the later start.
        ended = known.where(
            ~F.col("_fivetran_active")
            & (F.col("_next_start").isNull() | (F.col("_next_start") > F.col("_fivetran_end") + _one_ms()))
        )
        deletions = ended.select(
            *[col(c) for c in cols], (F.col("_fivetran_end") + _one_ms()).alias("t"), F.lit(True).alias("c_deleted")
        )
        return starts.unionByName(deletions)


class SnapshotSource(Source):
    """A dbt snapshot of daily extracts (check strategy, `updated_at` = the extract time, hard deletes
    as new records): every row starts at a capture; captures are recorded as `snapshot`
    transactions whose batch_id is the extract's day."""

    def __init__(self, frame: DataFrame, spec: HxSpec, name: str):
        super().__init__(frame, spec, name)
        self.has_deleted_flag = "dbt_is_deleted" in frame.columns

    def recordings(self, transactions: DataFrame, after_txn: int) -> list[Recording]:
        captured = self.recorded(each_part(transactions), ("snapshot",), after_txn)
        if not captured:
            return []
        # Each capture's time is its rows' dbt_valid_from on its day; read only the pending days
        # (a range Delta can skip files by), not the whole snapshot.
        first_day = min(r.batch_id for r in captured)
        times: dict[str, Any] = dict(
            self.frame.where(F.col("dbt_valid_from") >= F.to_timestamp(F.lit(first_day)))
            .select(F.date_format("dbt_valid_from", "yyyy-MM-dd").alias("day"), F.col("dbt_valid_from").alias("at"))
            .distinct()
            .collect()  # one row per captured day
        )
        # A capture that moved rows opened one on its day: a deletion too is a new row (hard_deletes:
        # new_record, as landing_extract configures the snapshot).
        return sorted(
            (Recording(r.txn_id, times[r.batch_id], r.author) for r in captured if r.batch_id in times),
            key=lambda rec: rec.txn_id,
        )

    def touched(self, rows: DataFrame, rec: Recording) -> DataFrame:
        return rows.where(F.col("dbt_valid_from") == F.lit(rec.at))

    def changed(self, pending: Sequence[Recording]) -> DataFrame:
        return self.frame.where(F.col("dbt_valid_from") >= F.lit(pending[0].at))

    def change_points(self, rows: DataFrame, rec: Recording) -> DataFrame:
        key, cols = list(self.spec.key), list(self.spec.columns)
        known = rows.where(F.col("dbt_valid_from") <= F.lit(rec.at)).withColumn(
            "_to", F.when(F.col("dbt_valid_to") <= F.lit(rec.at), F.col("dbt_valid_to"))
        )
        deleted = (F.col("dbt_is_deleted") == "True") if self.has_deleted_flag else F.lit(False)
        by_start = Window.partitionBy(*[col(k) for k in key]).orderBy("dbt_valid_from")
        known = known.withColumn("_next_start", F.lead("dbt_valid_from").over(by_start))
        starts = known.select(*[col(c) for c in cols], F.col("dbt_valid_from").alias("t"), deleted.alias("c_deleted"))
        # Without deletion records (hard_deletes: invalidate) a closed row with no successor was deleted.
        gaps = known.where(
            F.col("_to").isNotNull() & (F.col("_next_start").isNull() | (F.col("_next_start") > F.col("_to")))
        )
        deletions = gaps.select(*[col(c) for c in cols], F.col("_to").alias("t"), F.lit(True).alias("c_deleted"))
        return starts.unionByName(deletions)


def _one_ms() -> Column:
    # built when used: a column expression needs a running Spark session, an import does not
    return F.expr("INTERVAL 1 MILLISECOND")
