"""The transactions table's layout, declared once. The macros create it and list its columns from
here (`lakehistory.ensure_transactions_table`, `lakehistory.transaction_columns`, through
`adapter.call_python`), and the engine writes its rows in this order."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from lakehistory.history.sql import q


@dataclass(frozen=True)
class Field:
    name: str
    sql_type: str
    required: bool
    comment: str


LAYOUT = (
    Field("txn_id", "bigint", True, "Transaction id: 1, 2, 3, ... with no gaps, in commit order"),
    Field("txn_uuid", "string", True, "Naksha uuid of the transaction: txn_id, start date, object type 0, database id"),
    Field("operation", "string", True, "batch (a batch applied), snapshot (an extract captured), cleanup or revert"),
    Field("source_table", "string", False, "The landed table the batch belongs to"),
    Field("history_table", "string", True, "The history table the transaction changed"),
    Field("batch_id", "string", False, "The batch (its folder name in the landing root)"),
    Field("batch_sequence", "bigint", False, "The batch order within its table"),
    Field("author", "string", False, "Who made the change (the batch manifest)"),
    Field("app_id", "string", False, "The application that made the change (the batch manifest)"),
    Field("commit_message", "string", False, "Optional message of the batch manifest"),
    Field("started_at", "timestamp", True, "When applying the batch started"),
    Field("committed_at", "timestamp", True, "When the batch was committed"),
    Field("rows_in", "bigint", True, "Rows in the batch files (replace, update, delete, earliest)"),
    Field("versions_opened", "bigint", True, "History rows opened (valid_from = txn_id)"),
    Field("versions_closed", "bigint", True, "History rows closed (valid_to = txn_id)"),
    Field("rows_overlap_deleted", "bigint", True, "Rows removed from the Fivetran view by the overlap delete (rule 7)"),
    Field("rows_purged", "bigint", True, "Closed versions physically removed (cleanup)"),
    Field("delta_version", "bigint", True, "The Delta version of the history table this transaction committed"),
)
COLUMNS = tuple(field.name for field in LAYOUT)


class TransactionsLayoutError(RuntimeError):
    """The transactions table was made by another layout: new rows cannot go into it."""


def create_sql(relation: str) -> str:
    fields = ",\n    ".join(
        f"{q(f.name)} {f.sql_type}{' not null' if f.required else ''} comment '{f.comment}'" for f in LAYOUT
    )
    return f"create table if not exists {relation} (\n    {fields}\n) using delta"


# What a CREATE TABLE IF NOT EXISTS meets when another writer creates the same table at that
# moment: Delta's refusal of the second commit, the other's files before its first commit, or
# the metastore's refusal of the second registration.
CREATE_RACE_ERRORS = ("concurrent", "delta_create_table_with_non_empty_location", "already exists")


def create_if_missing(spark: SparkSession, relation: str, statement: str) -> None:
    """Run `statement` (a CREATE TABLE IF NOT EXISTS of `relation`); when another writer creates
    the table at the same moment, wait until its table is registered instead of failing."""
    for attempt in range(10):
        if attempt and spark.catalog.tableExists(relation.replace("`", "")):
            return
        try:
            spark.sql(statement)
            return
        except Exception as exc:
            if attempt == 9 or not any(e in str(exc).lower() for e in CREATE_RACE_ERRORS):
                raise
            time.sleep(1)


_ensured: set[tuple[str, str]] = set()  # (dbt invocation, relation): checked once per invocation


def ensure_transactions_table(spark: SparkSession, relation: str, invocation_id: str = "") -> None:
    """Entry point for `lakehistory.ensure_transactions_table`: create the table when missing;
    refuse one whose columns are not this layout's. Every node of a dbt invocation asks; the
    first one's answer holds for the others (`invocation_id`)."""
    if invocation_id and (invocation_id, relation) in _ensured:
        return
    create_if_missing(spark, relation, create_sql(relation))
    stored = set(spark.table(relation).columns)
    missing = [name for name in COLUMNS if name not in stored]
    if missing:
        raise TransactionsLayoutError(
            f"{relation} was made by an earlier version of lakehistory (it lacks {', '.join(missing)})."
            " Rebuild from the landed batches: drop it and the history tables (for the demo: make clean),"
            " then run dbt build."
        )
    if invocation_id:
        _ensured.add((invocation_id, relation))


def column_list(spark: SparkSession) -> str:
    """Entry point for `lakehistory.transaction_columns`: the columns, in order, for an insert."""
    return ", ".join(q(name) for name in COLUMNS)


def moved_rows(alias: str = "") -> str:
    """SQL: whether a transaction (a row of the transactions table, `alias` if given) opened,
    closed or purged a row of its history table. One that did none of these (the batch of a sync
    that brought nothing new for the table) has nothing that events, states or `_hx` rows record,
    so the models derived from the history table never count it as pending."""
    prefix = f"{q(alias)}." if alias else ""
    return "(" + " or ".join(f"{prefix}{q(c)} > 0" for c in ("versions_opened", "versions_closed", "rows_purged")) + ")"


def moved_rows_sql(spark: SparkSession, alias: str) -> str:
    """Entry point for the macro `lakehistory._moved_rows`."""
    return moved_rows(alias)
