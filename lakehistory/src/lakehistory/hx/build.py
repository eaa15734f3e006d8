"""The `_hx` model: `build_hx` reads the model's YAML, picks its source and appends the rows of
the transactions recorded since its last run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehistory.derived import take_new_columns
from lakehistory.hx.corrections import corrections
from lakehistory.hx.foreign_keys import resolve_foreign_key
from lakehistory.hx.model import (
    ForeignKey,
    HxError,
    HxSpec,
    col,
    hx_table,
    key_range,
)
from lakehistory.hx.sources import FivetranSource, SnapshotSource, Source
from lakehistory.names import (
    DELETED,
    EXTRACT_SYSTEM,
    HISTORY_SYSTEM,
    MOD_TIME,
    MOD_USER,
    SNAPSHOT_SYSTEM,
    START,
    TXN_ID,
    VALID_TO,
    ReservedNameError,
    refuse_reserved,
)
from lakehistory.sql import q


def _spec_from_meta(meta: Mapping[str, Any], source: DataFrame, parents: Mapping[str, DataFrame]) -> tuple[HxSpec, str]:
    hx = (meta or {}).get("lakehistory", {}).get("hx")
    if not hx:
        raise HxError("an _hx model needs meta.lakehistory.hx (table, key, source, foreign_keys) in its YAML")
    table, key, source_name = hx.get("table"), tuple(hx.get("key") or ()), hx.get("source")
    if not table or not key or not source_name:
        raise HxError("meta.lakehistory.hx needs table, key and source")
    system = {c.lower() for c in (*HISTORY_SYSTEM, *SNAPSHOT_SYSTEM, *EXTRACT_SYSTEM)}
    columns = tuple(c for c in source.columns if c.lower() not in system)
    if missing := [k for k in key if k not in columns]:
        raise HxError(f"{hx_table(table)}: key column(s) {', '.join(missing)} not in {source_name}")
    fks = []
    for entry in hx.get("foreign_keys") or ():
        parent = entry["parent"]
        if parent not in parents:
            raise HxError(f"{hx_table(table)}: pass the parent {parent} as parents={{'{parent}': dbt.ref('{parent}')}}")
        cols = tuple(entry["columns"])
        parent_table = parent[: -len("_hx")] if parent.endswith("_hx") else parent
        fks.append(ForeignKey(cols, parent_table, tuple(entry.get("parent_columns") or cols), parents[parent]))
    spec = HxSpec(table, key, columns, tuple(fks))
    try:
        refuse_reserved(hx_table(table), columns, "hx", extra=[spec.hx_id, *(fk.hx_column for fk in fks)])
    except ReservedNameError as exc:
        raise HxError(f"{exc} ({source_name})") from None
    return spec, source_name


def build_hx(
    dbt: Any,
    session: SparkSession,
    meta: Mapping[str, Any] | None,
    source: DataFrame,
    transactions: DataFrame,
    parents: Mapping[str, DataFrame] | None = None,
) -> DataFrame:
    """The rows to append to this `_hx` model (all of them on its first build). `meta` is the
    model's `dbt.config.get("meta")` (dbt hands a Python model only the configs its own file reads);
    `transactions` the project's transactions table, as dbt resolves it (`dbt.source(...)`)."""
    spec, source_name = _spec_from_meta(meta or {}, source, parents or {})
    if START in source.columns:
        if VALID_TO not in source.columns:
            raise HxError(
                f"{hx_table(spec.table)}: append-only history tables (no valid_to) are not a supported source yet"
            )
        src: Source = FivetranSource(source, spec, source_name)
    elif "dbt_valid_from" in source.columns:
        src = SnapshotSource(source, spec, source_name)
    else:
        raise HxError(f"{hx_table(spec.table)}: {source_name} is neither a fivetran_history table nor a dbt snapshot")
    if not dbt.is_incremental and session.catalog.tableExists(str(dbt.this).replace("`", "")):
        raise HxError(
            f"{hx_table(spec.table)}: --full-refresh would replace {dbt.this}, an append-only history no rebuild"
            " gives back (so would a build not materialized as incremental); lakehistory refuses, and nothing was"
            " changed. Run it without --full-refresh, or set full_refresh=False in its config to leave it out of a"
            " project-wide --full-refresh; to start a new `_hx` table on purpose, give the model a new alias."
        )
    existing = _with_new_columns(session, str(dbt.this), spec, source) if dbt.is_incremental else None
    return append_rows(spec, src, transactions, existing)


def _with_new_columns(session: SparkSession, this: str, spec: HxSpec, source: DataFrame) -> DataFrame:
    """The `_hx` table, with the columns its source gained since the last build (an add_column
    schema change, spec rule 17) added to it first: its rows read NULL in them, as the source's
    versions from before do, and no row or id changes."""
    take_new_columns(session, this, spec.columns, lambda: dict(source.dtypes))
    return session.table(this)


def _empty(session: SparkSession, spec: HxSpec, like: DataFrame) -> DataFrame:
    types = dict(like.dtypes)
    fields = [f"{q(c)} {types[c]}" for c in spec.columns]
    fields += [f"{MOD_TIME} timestamp", f"{MOD_USER} string", f"{DELETED} boolean", f"{spec.hx_id} bigint"]
    fields += [f"{fk.hx_column} bigint" for fk in spec.foreign_keys] + [f"{TXN_ID} bigint"]
    return session.createDataFrame([], ", ".join(fields))


def append_rows(spec: HxSpec, src: Source, transactions: DataFrame, existing: DataFrame | None) -> DataFrame:
    session = src.frame.sparkSession
    key, cols = list(spec.key), list(spec.columns)
    if existing is not None:
        marks = existing.agg(F.max(TXN_ID).alias("txn"), F.max(spec.hx_id).alias("id")).collect()[0]
        last_txn, last_id = marks.txn or 0, marks.id or 0
    else:
        last_txn, last_id = 0, 0
    pending = src.recordings(transactions, last_txn)
    if not pending:
        return _empty(session, spec, src.frame)

    # Everything below works on the keys the pending transactions touched, read once.
    touched = src.frame if existing is None else src.changed(pending)
    keys = touched.select(*[col(k) for k in key]).distinct().localCheckpoint()
    # The touched keys' range of the first key column, as a filter Delta can skip files with
    # (a semi join alone reads the whole table).
    in_range = key_range(keys, key[0])
    rows = src.frame.where(in_range).join(keys, key, "left_semi").localCheckpoint()
    recorded = (
        []
        if existing is None
        else [
            existing.where(in_range).join(keys, key, "left_semi").select(*_hx_state(cols), _order(TXN_ID, spec.hx_id))
        ]
    )
    appended: list[DataFrame] = []
    for rec in pending:
        rec_keys = src.touched(rows, rec).select(*[col(k) for k in key]).distinct()
        points = src.change_points(rows.join(rec_keys, key, "left_semi"), rec)
        known = recorded + [a.select(*_hx_state(cols), _order(TXN_ID, None)) for a in appended]
        if known:
            hx_rows = reduce(DataFrame.unionByName, known).join(rec_keys, key, "left_semi")
        else:  # a first build: nothing recorded yet
            hx_rows = points.where(F.lit(False)).select(
                *[col(c) for c in cols],
                F.col("t").alias(MOD_TIME),
                F.col("c_deleted").alias(DELETED),
                _order(None, None),
            )
        rows_r = corrections(points, hx_rows, key, cols).select(
            *[col(c) for c in cols],
            MOD_TIME,
            DELETED,
            F.lit(rec.author).cast("string").alias(MOD_USER),
            F.lit(rec.txn_id).cast("bigint").alias(TXN_ID),
        )
        appended.append(rows_r.localCheckpoint())

    out = reduce(DataFrame.unionByName, appended)
    # Ids in recording order: by transaction, then change time, then key (one window over new rows only).
    order = Window.orderBy(TXN_ID, MOD_TIME, *[col(k) for k in key])
    out = out.withColumn(spec.hx_id, (F.row_number().over(order) + F.lit(last_id)).cast("bigint")).localCheckpoint()
    for fk in spec.foreign_keys:
        out = resolve_foreign_key(out, fk, narrow=existing is not None)
    return out.select(*[col(c) for c in spec.output_columns])


def _hx_state(cols: Sequence[str]) -> list[Any]:
    return [*[col(c) for c in cols], F.col(MOD_TIME), F.col(DELETED)]


def _order(txn: str | None, row_id: str | None) -> Column:
    """Recording order of an `_hx` row: (transaction, id); rows of this run have no id yet and a
    larger transaction than any recorded row."""

    def part(name: str | None) -> Column:
        return F.col(name).cast("bigint") if name else F.lit(None).cast("bigint")

    return F.struct(part(txn).alias("txn"), part(row_id).alias("id")).alias("_ord")
