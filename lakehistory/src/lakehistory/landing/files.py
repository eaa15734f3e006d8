"""The landed files of a run's pending batches, read by Spark in as few reads as possible.

A backlog of a hundred batches is a hundred or more small files. Reading each on its own costs a
Spark job for its header and a scan in a hundred-way union; instead every CSV file's header is
read in one job (the first line of each file), the files are grouped by header, and each group
is one CSV read with that header as its schema. Every row keeps its file (`_lh_file_key`) and
its data row number in the file (`_lh_row`).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from urllib.parse import unquote

from pyspark.sql import DataFrame, DataFrameReader, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from lakehistory.errors import LakehistoryError
from lakehistory.sql import q


@dataclass(frozen=True)
class LandedFile:
    """One file a manifest lists, in a pending batch."""

    key: int  # its number among the run's files
    batch_id: str
    entry: str  # the path as the manifest gives it, relative to the batch folder
    path: str  # what Spark reads
    file_format: str  # 'csv' or 'parquet'

    @property
    def suffix(self) -> str:
        return f"/{self.batch_id}/{self.entry}"


# Set on a CSV row whose fields do not line up with its file's header (a field too many or too few).
MALFORMED = "_lh_malformed"

# Spark takes every path it reads as a Hadoop glob; these characters are escaped to read a name as it is.
GLOB_CHARACTERS = "\\*?[]{}"


def literal_path(name: str) -> str:
    """`name` as a path Spark reads literally (its glob characters escaped): `replace[0].csv` is
    that file, not a pattern."""
    return "".join("\\" + c if c in GLOB_CHARACTERS else c for c in name)


class UnreadableFileError(LakehistoryError):
    """A file Spark cannot read; `file` says which."""

    def __init__(self, file: LandedFile, cause: Exception) -> None:
        super().__init__(str(cause))
        self.file, self.cause = file, cause


def csv_options(reader: DataFrameReader) -> DataFrameReader:
    """How a landed CSV file is read: header, every cell a string (an empty field NULL).
    Backslash is an ordinary character; quotes are doubled; quoted fields may span lines."""
    return (
        reader.option("header", True)
        .option("multiLine", True)
        .option("quote", '"')
        .option("escape", '"')
        .option("mode", "FAILFAST")
        .option("encoding", "UTF-8")
    )


@dataclass(frozen=True)
class Header:
    names: list[str]
    spark_path: str | None  # the file's path as Spark gives it in `_metadata.file_path`


def headers(spark: SparkSession, files: Sequence[LandedFile]) -> dict[int, Header]:
    """The column names of every CSV file (its first line), in one Spark job: it scans the files
    whole, which costs less than a job per file. An empty file has none. Raises
    UnreadableFileError naming the first file that cannot be read."""
    if not files:
        return {}
    try:
        lines = (
            spark.read.text([f.path for f in files])
            .select(
                F.col("_metadata.file_path").alias("path"),
                F.monotonically_increasing_id().alias("at"),
                "value",
                F.col("_metadata.file_block_start").alias("block"),
            )
            .where("block = 0")
            .groupBy("path")
            .agg(F.min_by("value", "at").alias("header"))
            .collect()
        )
    except Exception as exc:
        raise _unreadable(spark, files, exc) from exc
    found = {f.key: Header([], None) for f in files}
    for row in lines:
        # Spark gives each file's path as a URI; the batch folder and the manifest's path end it.
        decoded = unquote(row.path)
        file = next((f for f in files if decoded.endswith(f.suffix)), None)
        if file is not None:
            names = next(csv.reader([row.header.rstrip("\r")], quotechar='"', doublequote=True), [])
            found[file.key] = Header(names, row.path)
    return found


def read_csv_files(spark: SparkSession, files: Sequence[LandedFile], found: dict[int, Header]) -> DataFrame:
    """The rows of CSV files with the headers `found` gives (checked by the caller: every file has
    its columns, none twice), as strings (an empty field is the empty string; a column a file
    lacks is NULL), with `_lh_file_key` and `_lh_row`. One Spark read per distinct header."""
    by_header: dict[tuple[str, ...], list[LandedFile]] = {}
    for f in files:
        by_header.setdefault(tuple(found[f.key].names), []).append(f)
    paths = [(found[f.key].spark_path, f.key) for f in files]
    keys = spark.createDataFrame(paths, "_lh_spark_path string, _lh_file_key int")
    frames = []
    for header, group in by_header.items():
        schema = StructType([StructField(n, StringType()) for n in [*header, MALFORMED]])
        # A row whose fields do not line up with the header is kept, marked, so that validation
        # names its file and data row (failing the read would name neither).
        reader = csv_options(spark.read.schema(schema)).option("mode", "PERMISSIVE")
        raw = reader.option("columnNameOfCorruptRecord", MALFORMED).csv([f.path for f in group])
        # Spark reads an empty field as NULL; in a batch file it is the empty string (spec rule 5),
        # and NULL is only ever the batch's null_string.
        frames.append(
            raw.select(
                *[F.coalesce(F.col(q(n)), F.lit("")).alias(n) for n in header],
                F.col(MALFORMED).isNotNull().alias(MALFORMED),
                F.col("_metadata.file_path").alias("_lh_spark_path"),
                F.monotonically_increasing_id().alias("_lh_at"),
            )
        )
    rows = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    tagged = rows.join(F.broadcast(keys), "_lh_spark_path")
    in_file = Window.partitionBy("_lh_file_key").orderBy("_lh_at")
    return tagged.select("*", F.row_number().over(in_file).cast("bigint").alias("_lh_row")).drop(
        "_lh_spark_path", "_lh_at"
    )


def read_parquet_file(spark: SparkSession, file: LandedFile) -> DataFrame:
    """A Parquet file's rows, every column cast to string, with `_lh_file_key` and `_lh_row`."""
    frame = spark.read.parquet(file.path)
    return frame.select(
        *[F.col(q(c)).cast("string").alias(c) for c in frame.columns],
        F.lit(file.key).alias("_lh_file_key"),
        (F.monotonically_increasing_id() + 1).alias("_lh_row"),
    )


def _unreadable(spark: SparkSession, files: Sequence[LandedFile], exc: Exception) -> Exception:
    """Which file made a read of all of them fail: each is read on its own (only on this error
    path) until one fails."""
    for f in files:
        try:
            spark.read.text(f.path).count()
        except Exception as own:
            return UnreadableFileError(f, own)
    return exc
