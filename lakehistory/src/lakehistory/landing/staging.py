"""Staging: the pending batches of one table, read as strings, tokens resolved, typed, validated.

Everything here is DataFrame work: files are read by Spark (any Spark-readable URI), casts and
checks are column expressions, and only bounded results reach the driver (the manifests, which
are one small row per batch, and at most a few offending rows when input is bad).

A batch that fails a check stops the whole run before anything is applied: the error names the
batch, the file, the data row and the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lakehistory.invocation import Invocation
from lakehistory.names import NOT_NULL_METADATA

from . import edits, run_reads
from .manifests import Landed, pending_manifests, read_landed, with_migrations
from .rows import batch_markers, schema_change_rows, stage_rows
from .spec import BatchError, TableSpec, first_line, spec_columns
from .validation import validate


def register_pending_batches(
    spark: SparkSession,
    view: str,
    landing_root: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[Sequence[str]],
    transactions: str | None = None,
    invocation: Invocation | None = None,
    run_tables: Sequence[Sequence[str]] = (),
    app_id_required: bool = False,
    not_null: Sequence[str] = (),
    history: str | None = None,
    project_tables: Sequence[Sequence[str]] = (),
    edits_from: str | None = None,
    current: str = "true",
) -> None:
    """For `lakehistory.landing_batches` (lakehistory.door): stage, validate and register the pending
    batches of `table` as the temp view `view`. `run_tables`: every [landing root, table] the
    `invocation` stages, sent by its first staging, which reads them all
    (run_reads.py). `app_id_required`: feature states are built from the table. `not_null`: the
    columns the source declares NOT NULL. `history`: the history table the batches are staged for,
    whose own record says which are applied (None: applied by any history table).
    `project_tables`: [landing root, table, kind] of every landed table the project applies
    (run_reads.py), sent with `run_tables`. `edits_from`: the main table whose edits are staged
    among the landed batches (edits.py); `current`: SQL true of the history table's rows still
    current (alias `h`)."""
    spec = TableSpec(
        table=table,
        key=tuple(key),
        columns=spec_columns(columns),
        app_id_required=app_id_required,
        not_null=frozenset(not_null),
    )
    found = run_reads.landed(
        spark, invocation or Invocation(""), transactions, landing_root, table, run_tables, history, project_tables
    )
    staged = stage_pending_batches(spark, landing_root, spec, transactions, found, history, edits_from, current)
    staged.createOrReplaceTempView(view)


def stage_pending_batches(
    spark: SparkSession,
    landing_root: str,
    spec: TableSpec,
    transactions: str | None = None,
    landed: Landed | BatchError | None = None,
    history: str | None = None,
    edits_from: str | None = None,
    current: str = "true",
) -> DataFrame:
    """The typed, validated rows of every batch of `spec.table` not yet applied to the history
    table `history` (None: to any), in batch order, and among them the edits of the main table
    `edits_from` that `history` has not recorded (edits.py; `current`: SQL true of the history
    table's rows still current, alias `h`). `_lh_ordinal` numbers the pending
    batches 1, 2, ... in the order they must be applied. `landed`: the table's manifests and
    applied batches, when the run has read them already."""
    if landed is None:
        stream = (spec.table, history)
        landed = read_landed(spark, transactions, landing_root, [stream])[stream]
    if isinstance(landed, BatchError):
        raise landed
    manifests, applied = landed.manifests, landed.applied
    spec = with_migrations(spec, [*(applied.recorded_changes or ()), *manifests])  # also checks every schema change
    pending = pending_manifests(manifests, spec, applied)
    commits = edits.edit_commits(spark, edits_from, applied.last_edit) if edits_from and history else []
    staged = _staged_landed(spark, spec, pending) if pending else None
    if commits and history and edits_from:
        batches, placed = edits.placed(staged, commits)
        renumbered = None if staged is None else edits.renumbered(staged, batches)
        edited = edits.staged_edits(spark, edits_from, spec, commits, placed, history, current, renumbered)
        staged = edited if renumbered is None else renumbered.unionByName(edited)
        staged = staged.localCheckpoint()
    if staged is None:
        staged = spark.createDataFrame([], spec.staged_schema())
    return _marked_not_null(staged, spec)


def _staged_landed(spark: SparkSession, spec: TableSpec, pending: list[dict[str, Any]]) -> DataFrame:
    """The rows of the pending landed batches, read once and validated."""
    changes = schema_change_rows(spark, spec, pending)
    rows = stage_rows(spark, spec, pending)
    staged = reduce(
        DataFrame.unionByName,
        ([rows] if rows is not None else [])
        + [batch_markers(spark, spec, pending)]
        + ([changes] if changes is not None else []),
    )
    try:
        # The files are read once: validation and the history merge read this copy.
        staged = staged.localCheckpoint()
        validate(staged, spec)
    except BatchError:
        raise
    except Exception as exc:  # e.g. a truncated gzip member surfaces when the file is scanned
        raise BatchError(f"Batches {', '.join(m['batch_id'] for m in pending)}: {first_line(exc)}") from exc
    return staged.drop("_lh_bad_cell", "_lh_misuse")


def _marked_not_null(staged: DataFrame, spec: TableSpec) -> DataFrame:
    """The columns declared NOT NULL, marked in the staged columns' metadata for the history
    table's creation (history/table.py), which a model's `select *` carries through. A column a
    schema change adds or drops is left out: versions from before the add, or after the drop,
    hold NULL in it."""
    for name in sorted(spec.not_null - spec.migrated):
        staged = staged.withMetadata(name, {NOT_NULL_METADATA: True})
    return staged
