"""The batches staged for a history model (a view of `lakehistory.landing_batches`), read as
Batch objects in batch order, and the session settings their apply runs with."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from lakehistory.history.group import ROW_KINDS, Batch
from lakehistory.history.session import SMALL_BATCH_ROWS, SMALL_BATCH_SETTINGS, session_conf
from lakehistory.landing.edits import EDIT_BATCH_PREFIX
from lakehistory.landing.syncs import SyncOf
from lakehistory.sql import q


def settings_for(batches: Sequence[Batch]) -> dict[str, str]:
    """The session settings an apply of `batches` runs with: those of a small batch (session.py)
    when they are few rows that rewrite no stored row beyond their keys, the profile's otherwise."""
    if sum(b.rows_in for b in batches) <= SMALL_BATCH_ROWS and not any(b.rewrites for b in batches):
        return dict(SMALL_BATCH_SETTINGS)
    return {}


def staged_batches(spark: SparkSession, staged: str, first_key: str) -> list[Batch]:
    """The staged batches in batch order: one small query over the staged rows, which are in
    memory (no Spark job when staging found nothing pending)."""
    query = spark.sql(
        f"""
        select
            s.`_lh_ordinal` as ordinal,
            max_by(s.`_lh_batch_id`, s.`_lh_kind` = 'batch') as batch_id,
            max(s.`_lh_sequence`) as sequence,
            max(s.`_lh_source_table`) as source_table,
            max_by(s.`_lh_author`, s.`_lh_kind` = 'batch') as author,
            max_by(s.`_lh_app_id`, s.`_lh_kind` = 'batch') as app_id,
            max_by(s.`_lh_commit_message`, s.`_lh_kind` = 'batch') as commit_message,
            max_by(s.`_lh_commit_json`, s.`_lh_kind` = 'batch') as commit_json,
            max_by(s.`_lh_schema_changes`, s.`_lh_kind` = 'batch') as recorded_schema_changes,
            max_by(s.`_lh_deleted_column`, s.`_lh_kind` = 'batch') as deleted_column,
            max_by(s.`_lh_sync`, s.`_lh_kind` = 'batch') as sync,
            max(s.`_lh_truncate_mode`) is not null as truncate,
            array_sort(collect_list(named_struct('row', s.`_lh_row`, 'op', s.`_lh_change_op`,
                'column', s.`_lh_change_column`)) filter (where s.`_lh_kind` = 'schema_change')) as schema_changes,
            count_if(s.`_lh_kind` in {ROW_KINDS}) as rows_in,
            min(s.{q(first_key)}) filter (where s.`_lh_kind` in {ROW_KINDS}) as key_lo,
            max(s.{q(first_key)}) filter (where s.`_lh_kind` in {ROW_KINDS}) as key_hi
        from {staged} as s
        group by s.`_lh_ordinal`
        order by s.`_lh_ordinal`
        """
    )
    # A row per batch, aggregated where the rows are first: one reduce partition holds them, at any size.
    with session_conf(spark, SMALL_BATCH_SETTINGS):
        rows = query.collect()
    return [
        Batch(
            ordinal=r.ordinal,
            batch_id=r.batch_id,
            sequence=r.sequence,
            source_table=r.source_table,
            author=r.author,
            app_id=r.app_id,
            commit_message=r.commit_message,
            commit_json=r.commit_json,
            truncate=r.truncate,
            schema_changes=tuple((c.row, c.op, c.column) for c in r.schema_changes),
            rows_in=r.rows_in,
            key_range=(r.key_lo, r.key_hi),
            deleted_column=r.deleted_column,
            sync=SyncOf.of(r.sync and r.sync.asDict(), r.author, r.app_id),
            recorded_schema_changes=r.recorded_schema_changes,
            operation="edit" if r.batch_id.startswith(EDIT_BATCH_PREFIX) else "batch",
        )
        for r in rows
    ]
