"""Tags: a name for a transaction, database-wide (seed 002: "snapshots (including database wide
snapshots), tagging"). A tag names every table as of one transaction, the consistent cut a reader
reproduces later by name (the data behind a published paper), and cleanup and retention keep
every version a tag needs.

    lakehistory.door.tag, lakehistory.door.drop_tag   # from lakehistory.tag and lakehistory.drop_tag

A tag is a row of `<transactions>_tags`: its name, the transaction, the transaction's start (the
version with timestamp versions), who made it, when and why. Tags are made and dropped under
the writer lock, as a cleanup runs, so a cleanup never removes the versions of a tag made while it
runs. The name and the note are data: they reach the table in a DataFrame, never in SQL text.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import lock, turn
from lakehistory.history.transactions import Field, beside, create_if_missing, create_sql
from lakehistory.history.writer import Writer

LAYOUT = (
    Field("tag", "string", True, "The tag's name: one per lakehouse"),
    Field("txn_id", "bigint", True, "The transaction it names: every table as of it"),
    Field("started_at", "timestamp", True, "The transaction's start: its version with timestamp versions"),
    Field("tagged_at", "timestamp", True, "When the tag was made"),
    Field("tagged_by", "string", False, "Who made it"),
    Field("note", "string", False, "Why, in the words of who made it"),
)
COLUMNS = tuple(f.name for f in LAYOUT)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def tags_relation(transactions: str) -> str:
    """The tags table beside the transactions table `transactions` (a quoted relation)."""
    return beside(transactions, "tags")


def ensure_tags_table(spark: SparkSession, transactions: str) -> str:
    """The tags table, made when missing; its name."""
    relation = tags_relation(transactions)
    create_if_missing(spark, relation, create_sql(relation, LAYOUT))
    return relation


def tag(
    spark: SparkSession,
    writer: Writer,
    name: str,
    txn_id: int,
    visible_txn_id: int,
    author: str | None,
    note: str | None,
) -> dict[str, Any]:
    """Name transaction `txn_id`. Refused: a name of another form, a transaction not visible yet
    (`visible_txn_id`: the last one every table of its sync has recorded), one whose versions a
    cleanup may have removed, and a name that names another transaction already. Naming the same
    transaction again changes nothing."""
    if not NAME.fullmatch(name or ""):
        raise HistoryError(
            f"tag {name!r}: a tag's name is 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a"
            " letter or digit"
        )
    transactions = writer.transactions
    relation = tags_relation(transactions)
    with turn.taking(spark, writer, "tag") as my:
        spark = my.spark
        ensure_tags_table(spark, transactions)
        log = spark.table(transactions)
        found = log.where(F.col("txn_id") == F.lit(txn_id)).select("started_at").limit(1).collect()
        if not found:
            last = log.agg(F.max("txn_id")).collect()[0][0] or 0
            raise HistoryError(f"tag {name}: there is no transaction {txn_id} (the last one is {last})")
        if txn_id > visible_txn_id:
            raise HistoryError(
                f"tag {name}: transaction {txn_id} is not visible yet (a table of its sync has not recorded it;"
                f" the last visible one is {visible_txn_id}): a reader as of the tag would see part of it"
            )
        _refuse_after_cleanup(log, name, txn_id)
        same = spark.table(relation).where(F.col("tag") == F.lit(name)).select("txn_id").collect()
        if same and same[0].txn_id == txn_id:
            return {"tag": name, "txn_id": txn_id, "already": True}
        if same:
            raise HistoryError(
                f"tag {name} names transaction {same[0].txn_id} already: drop it first (lakehistory.drop_tag)"
            )
        row = spark.createDataFrame(
            [(name, txn_id, author, note)], "tag string, txn_id bigint, tagged_by string, note string"
        ).select(
            "tag",
            "txn_id",
            F.lit(found[0].started_at).alias("started_at"),
            F.current_timestamp().alias("tagged_at"),
            "tagged_by",
            "note",
        )
        lock.check_held()
        spark.sql(
            f"""
            merge into {relation} as t
            using {{row}} as s
            on t.`tag` = s.`tag`
            when not matched then insert ({", ".join(f"`{c}`" for c in COLUMNS)})
                values ({", ".join(f"s.`{c}`" for c in COLUMNS)})
            """,
            row=row,
        )
    return {"tag": name, "txn_id": txn_id, "already": False}


def drop_tag(spark: SparkSession, writer: Writer, name: str) -> bool:
    """Drop the tag `name`; whether there was one. Its versions are cleanup's to remove again."""
    relation = tags_relation(writer.transactions)
    if not spark.catalog.tableExists(relation.replace("`", "")):
        return False
    with turn.taking(spark, writer, "drop_tag") as my:
        spark = my.spark
        if not spark.table(relation).where(F.col("tag") == F.lit(name)).limit(1).collect():
            return False
        lock.check_held()
        gone = spark.createDataFrame([(name,)], "tag string")
        spark.sql(
            f"merge into {relation} as t using {{gone}} as s on t.`tag` = s.`tag` when matched then delete", gone=gone
        )
    return True


def _refuse_after_cleanup(log: DataFrame, name: str, txn_id: int) -> None:
    """A cleanup after the transaction may have removed versions of its state."""
    found = (
        log.where((F.col("operation") == F.lit("cleanup")) & (F.col("txn_id") > F.lit(txn_id)))
        .select("history_table", "txn_id")
        .orderBy("txn_id")
        .limit(3)
        .collect()
    )
    if found:
        cleanups = ", ".join(f"{r.txn_id} ({r.history_table})" for r in found)
        raise HistoryError(
            f"tag {name}: cleanup transaction(s) {cleanups} came after transaction {txn_id} and may have removed"
            " versions of its state, which a tag could then no longer give back exactly"
        )
