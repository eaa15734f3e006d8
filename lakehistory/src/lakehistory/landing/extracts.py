"""Daily full extracts: the oldest extract a snapshot has not captured yet, typed and validated.

A table that lands as daily full extracts (`<landing_root>/extracts/<table>/<YYYY-MM-DD>.csv`,
docs/landing-format.md) is captured by a dbt snapshot, one extract per run, oldest first: a
snapshot sees one state of the table at a time, so each day's changes keep their own time.
When every extract is captured, the latest one is read again, which changes nothing. An extract
with a sync file beside it (`<YYYY-MM-DD>.sync.json`) belongs to that sync: its capture is
recorded under the sync's transaction (history/statements.py: `run_transaction`).

The extract is written, typed, to a Delta table beside the snapshot (`<snapshot>__lh_extract`):
dbt-spark stages a snapshot through a persistent view, which may not read a temporary one. Its
`extracted_at` is the snapshot's clock (`snapshot_get_time`, see the sparksession adapter) for the
rows the snapshot closes or marks deleted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import LakehistoryError
from lakehistory.invocation import Invocation
from lakehistory.names import EXTRACTED_AT, EXTRACTED_BY, ReservedNameError, refuse_reserved
from lakehistory.sql import q

from .batch import EXTRACT_SYNC_SUFFIX
from .rows import read_csv, typed
from .spec import BatchError, first_line
from .syncs import SyncOf, parse_sidecar


class ExtractError(LakehistoryError, ValueError):
    pass


def extract_days(spark: SparkSession, landing_root: str, table: str) -> list[tuple[dt.date, str]]:
    """(day, path) of every extract of `table`, oldest first. Files not named `YYYY-MM-DD.csv`
    (e.g. one being written under its temporary name) are not extracts."""
    folder = f"{landing_root.rstrip('/')}/extracts/{table}"
    try:
        paths = [r.path for r in spark.read.format("binaryFile").load(folder).select("path").collect()]
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return []
        raise
    out = []
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".csv"):
            continue
        try:
            out.append((dt.date.fromisoformat(name[: -len(".csv")]), path))
        except ValueError:
            continue
    return sorted(out)


def captured_day(spark: SparkSession, transactions: str | None, snapshot: str | None) -> dt.date | None:
    """The day of the latest extract the snapshot has captured: its latest `snapshot` transaction
    (a day without changes leaves no row in the snapshot, but it is captured). None before the
    first capture."""
    if not snapshot or not transactions or not spark.catalog.tableExists(transactions):
        return None
    latest = (
        spark.table(transactions)
        .where((F.col("operation") == "snapshot") & (F.lower("history_table") == snapshot.lower()))
        .agg(F.max("batch_id"))
        .collect()[0][0]
    )
    return dt.date.fromisoformat(latest) if latest is not None else None


@dataclass
class StagedSyncs:
    """An invocation's part (invocation.py): per snapshot, the sync of the extract it captures
    in this run, None for an extract of no sync or one captured already."""

    of: dict[str, SyncOf | None] = field(default_factory=dict)


def staged_sync(invocation: Invocation, snapshot: str) -> SyncOf | None:
    """The sync of the extract `snapshot` captures in this run (stage_next_extract), if any."""
    return invocation.part(StagedSyncs).of.get(snapshot)


def _sync_of(spark: SparkSession, path: str, table: str) -> SyncOf | None:
    """The sync an extract belongs to, from the sync file beside it; None when there is none."""
    sidecar = path[: -len(".csv")] + EXTRACT_SYNC_SUFFIX
    try:
        found = spark.read.format("binaryFile").load(sidecar).select("content").collect()
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return None
        raise
    try:
        return parse_sidecar(sidecar.rsplit("/", 1)[-1], bytes(found[0].content), table) if found else None
    except BatchError as exc:
        raise ExtractError("Extract " + str(exc).removeprefix("Batch ")) from None


def read_extract(
    spark: SparkSession, path: str, day: dt.date, table: str, key: Sequence[str], columns: Sequence[Sequence[str]]
) -> DataFrame:
    """The extract's rows typed by the source's columns, plus extracted_at and extracted_by.
    Raises ExtractError naming the file, row and column at fault."""
    name = path.rsplit("/", 1)[-1]

    def fail(message: str) -> ExtractError:
        return ExtractError(f"Extract {table}/{name}: {message}")

    try:
        raw = read_csv(spark, path)
        present = raw.columns
    except Exception as exc:
        raise fail(f"cannot be read: {first_line(exc)}") from exc
    wanted = [c for c, _ in columns] + [EXTRACTED_AT, EXTRACTED_BY]
    if missing := [c for c in wanted if c not in present]:
        raise fail(f"lacks column(s) {', '.join(missing)}")
    if unknown := [c for c in present if c not in wanted]:
        raise fail(f"has unknown column(s) {', '.join(unknown)}")
    types = dict((c, t) for c, t in columns) | {EXTRACTED_AT: "timestamp", EXTRACTED_BY: "string"}
    numbered = raw.withColumn("_lh_row", F.monotonically_increasing_id() + 1)  # data row (one partition per CSV)
    # An empty field is NULL in an extract; a non-empty one that does not convert is an error.
    bad_cell = F.coalesce(
        *[
            F.when(
                F.col(q(c)).isNotNull() & typed(F.col(q(c)), t).isNull(),
                F.concat(F.lit(f"column {c}: {t} expected, found "), F.to_json(F.array(F.col(q(c))))),
            )
            for c, t in types.items()
        ]
    )
    null_key = F.coalesce(*[F.when(F.col(q(k)).isNull(), F.lit(f"column {k}: the key may not be NULL")) for k in key])
    problems = numbered.select("_lh_row", F.coalesce(null_key, bad_cell).alias("problem")).where(
        F.col("problem").isNotNull()
    )
    try:
        first = problems.orderBy("_lh_row").limit(1).collect()
    except Exception as exc:
        raise fail(f"cannot be read: {first_line(exc)}") from exc
    if first:
        raise fail(f"data row {first[0]._lh_row}: {first[0].problem}")
    rows = numbered.select(*[typed(F.col(q(c)), t).alias(c) for c, t in types.items()], "_lh_row")
    duplicates = (
        rows.groupBy(*[F.col(q(k)) for k in key])
        .agg(F.min("_lh_row").alias("_lh_row"), F.count("*").alias("n"))
        .where("n > 1")
    )
    if dup := duplicates.orderBy("_lh_row").limit(1).collect():
        shown = ", ".join(f"{k}={dup[0][k]}" for k in key)
        raise fail(f"data row {dup[0]._lh_row}: key ({shown}) appears {dup[0].n} times")
    times = rows.agg(F.min(EXTRACTED_AT).alias("lo"), F.max(EXTRACTED_AT).alias("hi")).collect()[0]
    if times.lo is not None and (times.lo != times.hi or times.lo.date() != day):
        raise fail(
            f"{EXTRACTED_AT} must be one instant on {day.isoformat()}, the file's day; found {times.lo} to {times.hi}"
        )
    return rows.drop("_lh_row")


def stage_next_extract(
    spark: SparkSession,
    staged: str,
    landing_root: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[Sequence[str]],
    snapshot: str | None = None,
    transactions: str | None = None,
    invocation: Invocation | None = None,
) -> str | None:
    """For `lakehistory.landing_extract` (lakehistory.door): write the extract `snapshot` is to capture
    next to the Delta table `staged` (replacing what it held). Returns the extract's day (None when
    no extract has landed yet: `staged` is then empty). The extract's sync, if any, is the
    invocation's to know when the snapshot's capture takes its transaction (staged_sync)."""
    try:
        refuse_reserved(
            f"Extract {table}",
            [c for c, _ in columns],
            "extract",
            hint=f"Declare the source's columns only: every extract also carries {EXTRACTED_AT} and {EXTRACTED_BY}.",
        )
    except ReservedNameError as exc:
        raise ExtractError(str(exc)) from None
    days = extract_days(spark, landing_root, table)
    done = captured_day(spark, transactions, snapshot)
    todo = [d for d in days if done is None or d[0] > done]
    if days and done is not None and days[-1][0] < done:
        raise ExtractError(
            f"Extract {table}: the snapshot {snapshot} holds {done}, later than the latest extract {days[-1][0]}"
        )
    pick = todo[0] if todo else (days[-1] if days else None)
    if snapshot is not None and invocation is not None:
        invocation.part(StagedSyncs).of[snapshot] = _sync_of(spark, pick[1], table) if todo and pick else None
    if pick is None:
        schema = ", ".join(
            [f"{q(c)} {t}" for c, t in columns] + [f"{EXTRACTED_AT} timestamp", f"{EXTRACTED_BY} string"]
        )
        frame = spark.createDataFrame([], schema)
    else:
        frame = read_extract(spark, pick[1], pick[0], table, key, columns)
        if frame.isEmpty():
            # extracted_at is the snapshot's clock: an extract must say when it was taken.
            raise ExtractError(
                f"Extract {table}/{pick[0].isoformat()}.csv has no rows, so no {EXTRACTED_AT}:"
                " a table with no rows cannot be captured"
            )
    frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true").saveAsTable(staged)
    return pick[0].isoformat() if pick else None
