"""The transactions table's layout and its syncs table's, declared once. The macros create them
through lakehistory.door (`lakehistory.ensure_transactions_table`, which the ledger runs) and list
the transactions table's columns as `lakehistory.macro_names` wrote them
(`lakehistory.transaction_columns`), and the engine writes rows in this order.

A transaction has one row per table it changed: a batch of its own is one row; a sync (the
batches and extracts a source delivered together, named by their manifests) is one row per table
of it, all under the id the syncs table reserved for the sync (syncs.py). So is a revert or an
undo (operations/revert.py), which reserves its id there too, and a branch's publish: a table the
branch changed in several transactions gets one row, which lists them in `parts`. A reader of the
batches and captures a table applied reads each part (transaction_parts.each_part)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from lakehistory.errors import LakehistoryError
from lakehistory.landing.folders import hadoop_filesystem
from lakehistory.landing.spec import first_line
from lakehistory.sql import lit, q
from lakehistory.transaction_parts import PART_FIELDS, PARTS


@dataclass(frozen=True)
class Field:
    name: str
    sql_type: str
    required: bool
    comment: str

    def sql(self) -> str:
        """The column's definition in a CREATE TABLE or an ADD COLUMNS."""
        comment = self.comment.replace("\\", "\\\\").replace("'", "\\'")
        return f"{q(self.name)} {self.sql_type}{' not null' if self.required else ''} comment '{comment}'"


LAYOUT = (
    Field("txn_id", "bigint", True, "Transaction id: 1, 2, 3, ... with no gaps; the tables of one sync share it"),
    Field("txn_uuid", "string", True, "Naksha uuid of the transaction: txn_id, start date, object type 0, database id"),
    Field(
        "operation",
        "string",
        True,
        "batch, edit (a commit of a main table), snapshot (an extract captured), cleanup, revert or abandon"
        " (sync given up)",
    ),
    Field("source_table", "string", False, "The landed table the batch belongs to"),
    Field("history_table", "string", True, "The history table the transaction changed (an abandon: the syncs table)"),
    Field("batch_id", "string", False, "The batch (its folder name in the landing root)"),
    Field(
        "batch_sequence", "bigint", False, "The batch order within its table (an edit: the main table's Delta version)"
    ),
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
    Field("sync_id", "string", False, "The sync the transaction applied or gave up, a revert's reservation, or NULL"),
    Field("commit_json", "string", False, "Optional JSON of the batch manifest (seed 002's commit_json), as JSON text"),
    Field("schema_changes", "string", False, "A batch's schema changes (op, column, type), as JSON text; [] for none"),
    Field(
        "parts",
        f"array<struct<{', '.join(f'{q(n)}: {t}' for n, t in PART_FIELDS)}>>",
        False,
        "A published branch's transactions on the table, when it had several, each as the branch recorded it"
        " (the row's batch_id and batch_sequence are the last one's); NULL otherwise",
    ),
    # Seed 002's columns that the recording itself writes (ledger.insert_transactions), not the writer:
    Field("row_index", "bigint", False, "Unique index of the row, increasing in the order rows were recorded (i)"),
    Field("database_id", "bigint", False, "The database id in txn_uuid: var lakehistory_database_id (txdb)"),
    Field(
        "visible_at",
        "timestamp",
        False,
        "When the transaction became visible: every table of it and every transaction before it recorded (ts)",
    ),
)
# Written by the recording (ledger.insert_transactions) from the other columns and the table.
RECORDING_COLUMNS = ("row_index", "database_id", "visible_at")
# The columns a transaction's writer gives, in the table's order (a publish's ledger rows give
# `parts` too).
COLUMNS = tuple(field.name for field in LAYOUT if field.name not in (*RECORDING_COLUMNS, PARTS))
TABLE_COLUMNS = tuple(field.name for field in LAYOUT)

SYNCS_LAYOUT = (
    Field("txn_id", "bigint", True, "The transaction id every table of the sync records"),
    Field("sync_id", "string", True, "The sync, as the manifests of its batches name it (lakehistory:... a revert's)"),
    Field("sync_sequence", "bigint", True, "The sync's order in the landing: ids follow it (a revert's: its id)"),
    Field("tables", "array<string>", True, "Its landed tables (a revert's: history tables); visible once all apply it"),
    Field("author", "string", False, "Who made the sync's changes (its manifests)"),
    Field("app_id", "string", False, "The application that made them (its manifests)"),
    Field("started_at", "timestamp", True, "The transaction's start, shared by its tables"),
    Field("reserved_at", "timestamp", True, "When the id was reserved, before any table of the sync applied it"),
    Field("request", "string", False, "A revert's or undo's request, as JSON, to complete it after a stop"),
)
SYNCS_COLUMNS = tuple(field.name for field in SYNCS_LAYOUT)
# A revert or undo of several tables is one transaction too, reserved in the syncs table as a
# sync is, under an id no landed sync can have (a landing's sync ids have no colon).
OPERATION_SYNC_PREFIX = "lakehistory:"
# The operation of the row that gives a sync up (operations/abandon.py), under the sync's id.
ABANDON = "abandon"


def beside(transactions: str, suffix: str) -> str:
    """The table named `<transactions>_<suffix>`, beside the transactions table `transactions` (a
    quoted relation or not)."""
    return f"{transactions[:-1]}_{suffix}`" if transactions.endswith("`") else f"{transactions}_{suffix}"


def syncs_relation(transactions: str) -> str:
    """The syncs table beside the transactions table `transactions`."""
    return beside(transactions, "syncs")


class TransactionsLayoutError(LakehistoryError, RuntimeError):
    """The transactions table was made by another layout: new rows cannot go into it."""


def create_sql(relation: str, layout: tuple[Field, ...] = LAYOUT) -> str:
    fields = ",\n    ".join(f.sql() for f in layout)
    return f"create table if not exists {relation} (\n    {fields}\n) using delta"


# A managed table's folder that holds files, but no table the metastore knows: Delta refuses to
# create the table there. Another writer creating it at this moment, or a creation cut short
# (Delta committed the table's first version; the process died before the metastore registered it).
UNREGISTERED_FOLDER = "delta_create_table_with_non_empty_location"
# What a CREATE TABLE IF NOT EXISTS meets when another writer creates the same table at that
# moment: Delta's refusal of the second commit, the other's files before its first commit, or
# the metastore's refusal of the second registration.
CREATE_RACE_ERRORS = ("concurrent", UNREGISTERED_FOLDER, "already exists")
_LOCATION = re.compile(r"location \('(.*?)'\) is not empty", re.IGNORECASE)


def create_if_missing(spark: SparkSession, relation: str, statement: str, wait: bool = True) -> None:
    """Run `statement` (a CREATE TABLE of `relation`, made by this product); when another writer
    creates the table at the same moment, wait until its table is registered instead of failing
    (`wait`: a writer under the writer lock has no other to wait for). A table whose creation
    was cut short is completed: its folder is registered as the table (adopt_folder)."""
    for attempt in range(10 if wait else 1):
        if attempt and spark.catalog.tableExists(relation.replace("`", "")):
            return
        try:
            spark.sql(statement)
            return
        except Exception as exc:
            text = str(exc)
            if UNREGISTERED_FOLDER in text.lower() and (attempt == 9 or not wait):
                adopt_folder(spark, relation, statement, text)
                return
            if not wait or attempt == 9 or not any(e in text.lower() for e in CREATE_RACE_ERRORS):
                raise
            time.sleep(1)


def adopt_folder(spark: SparkSession, relation: str, statement: str, refusal: str) -> None:
    """Register the folder Delta's `refusal` names as `relation`, for a creation that was cut
    short after Delta's first commit: that commit is the table `statement` makes (its layout, and
    a CREATE TABLE AS SELECT's rows), which the metastore never learned of. The table is then
    external: dropping it leaves the folder, which the next creation adopts again. A folder whose
    log holds no commit (cut short before its first was whole) is removed and the table made anew,
    where this process reaches the files (the embedded target); through Spark Connect the error
    names the folder."""
    found = _LOCATION.search(refusal)
    if found is None:
        raise RuntimeError(f"{relation} could not be created, and its folder is not named: {refusal}")
    folder = found.group(1)
    try:
        spark.sql(f"create table {relation} using delta location {lit(folder)}")
        return
    except Exception as exc:
        if "already exists" in str(exc).lower():
            return  # another writer registered it meanwhile
        refused = exc
    # No commit Delta can read: the creation was cut short before its first commit was whole.
    hadoop = hadoop_filesystem(spark)
    commits = [n for n, _ in hadoop.list(f"{folder}/_delta_log") if n.endswith(".json")] if hadoop else None
    if hadoop is None or any(not name.startswith(".") for name in commits or ()):
        raise RuntimeError(
            f"{relation} cannot be created: its folder {folder} holds files but no table Delta can read"
            f" ({first_line(refused)}). Move the folder away and run again."
        ) from None
    hadoop.remove(folder)  # only a commit's temporary files: nothing was ever committed there
    spark.sql(statement)


# Every record and every reservation commits a few rows, a file each. Past this many files, a
# read of the table (every run's first writer reads it whole) costs more in files than in rows.
COMPACT_AT_FILES = 64


def compact_tables(spark: SparkSession, relation: str) -> None:
    """Under the writer lock, once per dbt invocation: rewrite the transactions table and its
    syncs table into a few files each once the transactions table has grown to COMPACT_AT_FILES
    (the syncs table grows slower: a reservation is one commit for all the syncs a run reserves,
    each of which the transactions table then records). The rows stay as they are; readers go on
    reading the version they started with."""
    if spark.sql(f"describe detail {relation}").collect()[0]["numFiles"] >= COMPACT_AT_FILES:
        for table in (relation, syncs_relation(relation)):
            spark.sql(f"optimize {table}")


def column_list() -> str:
    """The columns a writer gives, in order and quoted, for an insert."""
    return ", ".join(q(name) for name in COLUMNS)


def moved_rows(alias: str = "") -> str:
    """SQL: whether a transaction (a row of the transactions table, `alias` if given) opened,
    closed or purged a row of its history table. One that did none of these (the batch of a sync
    that brought nothing new for the table) has nothing that events, states or `_hx` rows record,
    so the models derived from the history table never count it as pending."""
    prefix = f"{q(alias)}." if alias else ""
    return "(" + " or ".join(f"{prefix}{q(c)} > 0" for c in ("versions_opened", "versions_closed", "rows_purged")) + ")"
