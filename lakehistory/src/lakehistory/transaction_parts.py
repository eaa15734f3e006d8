"""The parts of a transactions table's row that publishes a branch's transactions on one table.

A branch's publish is one transaction of main with one row per table (operations/branches.py).
A table the branch changed in several transactions lists them in that row's `parts`, each as the
branch recorded it; the row's own batch and sequence are the last part's. What reads the batches
and captures a table applied (the landing's applied batches, the writer's last sequence, a
snapshot's captured days) reads each part."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

PARTS = "parts"
# A part's fields and types: the transactions table's columns of the same names.
PART_FIELDS = (
    ("txn_id", "bigint"),
    ("operation", "string"),
    ("source_table", "string"),
    ("batch_id", "string"),
    ("batch_sequence", "bigint"),
    ("author", "string"),
    ("app_id", "string"),
    ("commit_message", "string"),
    ("rows_in", "bigint"),
    ("versions_opened", "bigint"),
    ("versions_closed", "bigint"),
    ("commit_json", "string"),
    ("schema_changes", "string"),
)
# What a part says for itself; a row's other columns (its id, table, times) hold for every part.
_OWN = ("operation", "source_table", "batch_id", "batch_sequence", "author", "schema_changes")


def each_part(recorded: DataFrame) -> DataFrame:
    """The transactions table `recorded` with a row per part: a row that lists `parts` becomes one
    row per part, with the part's operation, source table, batch, sequence, author and schema
    changes, under the row's id and history table; every other row stays as it is."""
    if PARTS not in recorded.columns:
        return recorded
    kept = [c for c in recorded.columns if c not in _OWN]
    part = F.explode(F.coalesce(F.col(PARTS), F.array(_own_part()))).alias("_lh_part")
    return recorded.select(*kept, part).select(*kept, *(F.col(f"_lh_part.{c}").alias(c) for c in _OWN))


def _own_part() -> Column:
    return F.struct(*(F.col(name).cast(sql_type).alias(name) for name, sql_type in PART_FIELDS))
