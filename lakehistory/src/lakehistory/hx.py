"""`_hx` history tables (seed 003, PCIC CRMP): every recorded change of a table, append-only.

A dbt Python model builds one `xxx_hx` table from a history table of the `fivetran_history`
strategy or from a dbt snapshot of daily extracts:

    from lakehistory.hx import build_hx

    def model(dbt, session):
        dbt.config(materialized="incremental", full_refresh=False)
        return build_hx(dbt, session, dbt.config.get("meta"), dbt.ref("meta_station_history"),
                        dbt.source("lakehistory", "lakehistory_transactions"),
                        parents={"meta_network_hx": dbt.ref("meta_network_hx")})

`dbt.source("lakehistory", "lakehistory_transactions")` is the project's transactions table (declare
that source with the var `lakehistory_transactions` as its identifier: README "Install"), and the
model's YAML says what the table is (`meta.lakehistory.hx`): the main table's name, its key,
the source model and its foreign keys (`columns`, `parent` hx model, `parent_columns`).

Columns: the main table's columns, `mod_time` (valid time of the change), `mod_user` (author of the
transaction that recorded it), `deleted` (the row records a deletion and carries the last values),
`xxx_hx_id` (primary key, increasing in recording order), one history foreign key `yyy_hx_id` per
foreign key, and `txn_id` (the lakehouse transaction that recorded the row).

What is appended. A transaction r changes what is known about some keys. For each such key, the
source gives its valid-time history as known after r: change points (a version starts; a deletion
takes effect) with their contents. The `_hx` rows recorded so far give their own reading: at any
time t, the row with the greatest (mod_time, id) at or before t. The rows appended for r are
exactly those that make the two readings agree: one row at every change point the `_hx` table
lacks or states differently, and one at every earlier `_hx` time whose reading r made wrong (a
retracted version gets a deletion row there). Re-delivered content appends nothing; a late version
appends one row with an early `mod_time` and a large id; nothing recorded is ever rewritten.

History foreign keys are resolved once, when a child row is appended: the parent `_hx` row of the
same key with the greatest (mod_time, id) at or before the child's `mod_time`. When the parent's
first recorded row is later than the child (a parent seen late, e.g. through a daily extract),
the parent's first row. NULL only when the foreign key is NULL or the parent key was never
recorded. `history_fk_sql` is that rule, for the build and for the `hx_resolved` macro alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehistory.history.sql import q

MOD_TIME, MOD_USER, DELETED, TXN_ID = "mod_time", "mod_user", "deleted", "txn_id"
ONE_MS = F.expr("INTERVAL 1 MILLISECOND")

FIVETRAN_SYSTEM = ("_fivetran_start", "_fivetran_end", "_fivetran_active", "_fivetran_synced", "valid_from", "valid_to")
SNAPSHOT_SYSTEM = ("dbt_scd_id", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to", "dbt_is_deleted")
EXTRACT_SYSTEM = ("extracted_at", "extracted_by")


class HxError(ValueError):
    """An `_hx` model that cannot be built as configured."""


def hx_table(table: str) -> str:
    """`xxx` -> `xxx_hx` (seed 003)."""
    return f"{table}_hx"


def hx_id(table: str) -> str:
    """`xxx` -> `xxx_hx_id`: the full main-table name, not its key's (seed 003)."""
    return f"{table}_hx_id"


def _q(name: str) -> Column:
    return F.col(f"`{name}`")


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    parent_table: str  # the parent's main table: its history key is `<parent_table>_hx_id`
    parent_columns: tuple[str, ...]
    parent: DataFrame  # the parent's `_hx` rows

    @property
    def hx_column(self) -> str:
        return hx_id(self.parent_table)


@dataclass(frozen=True)
class HxSpec:
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]  # the main table's columns, key first in source order
    foreign_keys: tuple[ForeignKey, ...] = ()

    @property
    def hx_id(self) -> str:
        return hx_id(self.table)

    @property
    def output_columns(self) -> list[str]:
        return [
            *self.columns,
            MOD_TIME,
            MOD_USER,
            DELETED,
            self.hx_id,
            *(fk.hx_column for fk in self.foreign_keys),
            TXN_ID,
        ]


# -- the source: change points per recording ------------------------------------------------------


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

    def recorded(self, transactions: DataFrame, operation: str, after_txn: int) -> list[Any]:
        """This source's transactions of `operation` after `after_txn`, in id order: one row each.

        A transaction names its history table as `schema.table`; the `_hx` model knows its source
        by name only, and that source may live in another schema (custom schemas), so the two
        are matched by table name, and two tables of that name in one transactions table are
        refused rather than mixed."""
        table = F.lower("history_table")
        name = self.name.lower()
        rows = (
            transactions.where(
                ((table == F.lit(name)) | table.endswith(F.lit("." + name)))
                & (F.col("operation") == F.lit(operation))
                & (F.col("txn_id") > F.lit(after_txn))
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
        rows = self.recorded(transactions, "batch", after_txn)
        return [Recording(r.txn_id, r.started_at if self.by_time else r.txn_id, r.author) for r in rows]

    def _open_at(self, at) -> Column:
        return (F.col("valid_from") <= F.lit(at)) & (F.col("valid_to").isNull() | (F.col("valid_to") > F.lit(at)))

    def touched(self, rows: DataFrame, rec: Recording) -> DataFrame:
        return rows.where((F.col("valid_from") == F.lit(rec.at)) | (F.col("valid_to") == F.lit(rec.at)))

    def changed(self, pending: Sequence[Recording]) -> DataFrame:
        ats = [F.lit(r.at) for r in pending]
        return self.frame.where((F.col("valid_from") >= F.lit(pending[0].at)) | F.col("valid_to").isin(*ats))

    def change_points(self, rows: DataFrame, rec: Recording) -> DataFrame:
        key, cols = list(self.spec.key), list(self.spec.columns)
        known = rows.where(self._open_at(rec.at))
        by_start = Window.partitionBy(*[_q(k) for k in key]).orderBy("_fivetran_start")
        known = known.withColumn("_next_start", F.lead("_fivetran_start").over(by_start))
        starts = known.select(
            *[_q(c) for c in cols], F.col("_fivetran_start").alias("t"), F.lit(False).alias("c_deleted")
        )
        # An inactive version that ends before the next one starts was deleted (rule 2: end = the
        # delete time, inclusive): the deletion takes effect at end + 1 ms, half-open like every
        # other change. A version that ends at or after the next start (a late version leaves the
        # one before it overlapping, rule 8) is superseded by the later start.
        ended = known.where(
            ~F.col("_fivetran_active")
            & (F.col("_next_start").isNull() | (F.col("_next_start") > F.col("_fivetran_end") + ONE_MS))
        )
        deletions = ended.select(
            *[_q(c) for c in cols], (F.col("_fivetran_end") + ONE_MS).alias("t"), F.lit(True).alias("c_deleted")
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
        captured = self.recorded(transactions, "snapshot", after_txn)
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
        # A capture that changed nothing left no row, and has nothing to record.
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
        by_start = Window.partitionBy(*[_q(k) for k in key]).orderBy("dbt_valid_from")
        known = known.withColumn("_next_start", F.lead("dbt_valid_from").over(by_start))
        starts = known.select(*[_q(c) for c in cols], F.col("dbt_valid_from").alias("t"), deleted.alias("c_deleted"))
        # Without deletion records (hard_deletes: invalidate) a closed row with no successor was deleted.
        gaps = known.where(
            F.col("_to").isNotNull() & (F.col("_next_start").isNull() | (F.col("_next_start") > F.col("_to")))
        )
        deletions = gaps.select(*[_q(c) for c in cols], F.col("_to").alias("t"), F.lit(True).alias("c_deleted"))
        return starts.unionByName(deletions)


# -- the diff: rows that make the _hx reading agree with the source ---------------------------------


def _content_equal(a: str, b: str, cols: Sequence[str]) -> Column:
    """Two states (structs, NULL = no row) say the same: both absent or deleted, or both live with
    equal values (NULL equal to NULL)."""
    a_gone = F.col(a).isNull() | F.col(f"{a}.c_deleted")
    b_gone = F.col(b).isNull() | F.col(f"{b}.c_deleted")
    same_values = reduce(
        lambda x, y: x & y, [F.col(f"{a}.`{c}`").eqNullSafe(F.col(f"{b}.`{c}`")) for c in cols], F.lit(True)
    )
    return F.coalesce((a_gone & b_gone) | (~a_gone & ~b_gone & same_values), F.lit(False))


def corrections(points: DataFrame, hx_rows: DataFrame, key: Sequence[str], cols: Sequence[str]) -> DataFrame:
    """Rows to append so that the `_hx` reading of `hx_rows` (key, mod_time, deleted, columns, _ord)
    equals the source reading of `points` (key, t, c_deleted, columns) on every key of `points`."""
    data = [c for c in cols if c not in key]
    state = [F.col("c_deleted"), *[_q(c) for c in data]]
    f = points.select(*[_q(k) for k in key], "t", F.struct(*state).alias("f"))
    # The _hx reading at a time: its latest-recorded row there (greatest _ord).
    g = (
        hx_rows.select(
            *[_q(k) for k in key],
            F.col(MOD_TIME).alias("t"),
            "_ord",
            F.struct(F.col(DELETED).alias("c_deleted"), *[_q(c) for c in data]).alias("g"),
        )
        .groupBy(*[_q(k) for k in key], "t")
        .agg(F.max_by("g", "_ord").alias("g"))
    )
    both = f.join(g, [*key, "t"], "full_outer")
    upto = (
        Window.partitionBy(*[_q(k) for k in key]).orderBy("t").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    both = both.withColumn("f_state", F.last("f", ignorenulls=True).over(upto)).withColumn(
        "g_state", F.last("g", ignorenulls=True).over(upto)
    )
    same = _content_equal("f_state", "g_state", data)
    # At a change point the _hx table needs a row of its own; elsewhere only the reading must agree.
    needed = F.when(F.col("f").isNotNull(), F.col("g").isNull() | ~same).otherwise(~same)
    live = F.col("f_state").isNotNull() & ~F.col("f_state.c_deleted")
    carried = F.when(F.col("f_state").isNotNull(), F.col("f_state")).otherwise(
        F.col("g_state")
    )  # a retraction carries what it retracts
    return both.where(needed).select(
        *[_q(k) for k in key],
        *[carried[c].alias(c) for c in data],
        F.col("t").alias(MOD_TIME),
        (~live).alias(DELETED),
    )


# -- history foreign keys: an as-of join on intervals of time -------------------------------------


def history_fk_sql(
    children: str,
    columns: Sequence[str],
    parent: str,
    parent_columns: Sequence[str],
    parent_id: str,
    resolved_as: str,
) -> str:
    """The history-FK rule, the one place it is written: a query over every row of `children` (a
    relation or a parenthesised query with the foreign key `columns` and `mod_time`) plus
    `resolved_as`, the id of the `parent` `_hx` row current at the child's mod_time: of the rows
    of the parent key, the one with the greatest (mod_time, id) at or before it; the first one
    when the child is older than them all (or has no mod_time); NULL when the foreign key is NULL
    or the parent key was never recorded. The build resolves new rows with it, `hx_resolved`
    every row against the parent rows known now.

    The parent's rows become intervals of time, each [its mod_time, the next row's) in the order
    (mod_time, id), the first one reaching back without end; of rows with one mod_time only the
    last keeps a non-empty interval. Each child joins the one interval of its key that holds its
    mod_time: an equi-join on the key with a range filter, so no window runs over the children
    and Spark broadcasts the intervals when they are small."""
    k = [f"`_lh_k{i}`" for i in range(len(columns))]
    keys = ", ".join(k)
    parent_keys = ", ".join(f"p.{q(c)} as {n}" for c, n in zip(parent_columns, k, strict=True))
    same_key = " and ".join(f"c.{q(c)} = i.{n}" for c, n in zip(columns, k, strict=True))
    return f"""select c.*, i.`_lh_parent` as {q(resolved_as)}
from {children} as c
left join (
    select {keys}, `_lh_parent`,
        case when row_number() over w > 1 then `_lh_t` end as `_lh_from`,
        lead(`_lh_t`) over w as `_lh_to`
    from (select {parent_keys}, p.`{MOD_TIME}` as `_lh_t`, p.{q(parent_id)} as `_lh_parent` from {parent} as p) as v
    window w as (partition by {keys} order by `_lh_t`, `_lh_parent`)
) as i
    on {same_key}
    and (i.`_lh_from` is null or i.`_lh_from` <= c.`{MOD_TIME}`)
    and (i.`_lh_to` is null or c.`{MOD_TIME}` is null or c.`{MOD_TIME}` < i.`_lh_to`)"""


def hx_resolved_sql(_spark: object, **rule: Any) -> str:
    """`history_fk_sql` for the `hx_resolved` macro (`adapter.call_python` passes the session first)."""
    return history_fk_sql(**rule)


def resolve_foreign_key(children: DataFrame, fk: ForeignKey, *, narrow: bool = True) -> DataFrame:
    """`children` plus `fk.hx_column`, by `history_fk_sql`.

    `narrow` first cuts the parent's rows down to the children's keys (a key range Delta skips
    files by, then a semi join), so that an incremental run's window covers its batch's parents,
    not the whole parent table. A first build passes `narrow=False`: its children are the whole
    child table, and cutting the parent down to their keys would cost a pass over them to save
    little."""
    parent = fk.parent
    if narrow:
        has_key = reduce(lambda x, y: x & y, [_q(c).isNotNull() for c in fk.columns])
        wanted_keys = (
            children.where(has_key)
            .select(*[_q(c).alias(p) for c, p in zip(fk.columns, fk.parent_columns, strict=True)])
            .distinct()
            .localCheckpoint()  # read twice: for the range and for the semi join
        )
        parent = parent.where(_key_range(wanted_keys, fk.parent_columns[0])).join(
            wanted_keys, list(fk.parent_columns), "left_semi"
        )
    # pyspark's SQL formatter puts the DataFrames in for `{children}` and `{parent}`; every other
    # brace (in a column name, say) is doubled so that it stays literal.
    marks = {"children": "\x00children\x00", "parent": "\x00parent\x00"}
    sql = history_fk_sql(marks["children"], fk.columns, marks["parent"], fk.parent_columns, fk.hx_column, fk.hx_column)
    sql = sql.replace("{", "{{").replace("}", "}}")
    for name, mark in marks.items():
        sql = sql.replace(mark, "{" + name + "}")
    resolved = children.sparkSession.sql(sql, children=children, parent=parent)
    # Over Spark Connect the query names its inputs by id, and the server drops a checkpointed
    # input when its Python object goes: the result's plan holds them for as long as it lives.
    plan = getattr(resolved, "_plan", None)  # a Connect DataFrame's plan; classic Spark has none
    if plan is not None:
        plan.lakehistory_inputs = (children, parent)
    return resolved


# -- the model -------------------------------------------------------------------------------------


def _spec_from_meta(meta: Mapping, source: DataFrame, parents: Mapping[str, DataFrame]) -> tuple[HxSpec, str]:
    hx = (meta or {}).get("lakehistory", {}).get("hx")
    if not hx:
        raise HxError("an _hx model needs meta.lakehistory.hx (table, key, source, foreign_keys) in its YAML")
    table, key, source_name = hx.get("table"), tuple(hx.get("key") or ()), hx.get("source")
    if not table or not key or not source_name:
        raise HxError("meta.lakehistory.hx needs table, key and source")
    system = set(FIVETRAN_SYSTEM + SNAPSHOT_SYSTEM + EXTRACT_SYSTEM) | {"removal"}
    # mod_time and mod_user are the system's: a source column of that name is never taken over.
    columns = tuple(
        c for c in source.columns if c not in system and not c.startswith("_lh_") and c not in (MOD_TIME, MOD_USER)
    )
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
    clash = {DELETED, TXN_ID, spec.hx_id, *(fk.hx_column for fk in fks)} & set(columns)
    if clash:
        raise HxError(f"{hx_table(table)}: source column(s) {', '.join(sorted(clash))} clash with _hx system columns")
    return spec, source_name


def build_hx(
    dbt,
    session: SparkSession,
    meta: Mapping | None,
    source: DataFrame,
    transactions: DataFrame,
    parents: Mapping[str, DataFrame] | None = None,
) -> DataFrame:
    """The rows to append to this `_hx` model (all of them on its first build). `meta` is the
    model's `dbt.config.get("meta")` (dbt hands a Python model only the configs its own file reads);
    `transactions` the project's transactions table, as dbt resolves it (`dbt.source(...)`)."""
    spec, source_name = _spec_from_meta(meta or {}, source, parents or {})
    if "_fivetran_start" in source.columns:
        if "valid_to" not in source.columns:
            raise HxError(
                f"{hx_table(spec.table)}: append-only history tables (no valid_to) are not a supported source yet"
            )
        src: Source = FivetranSource(source, spec, source_name)
    elif "dbt_valid_from" in source.columns:
        src = SnapshotSource(source, spec, source_name)
    else:
        raise HxError(f"{hx_table(spec.table)}: {source_name} is neither a fivetran_history table nor a dbt snapshot")
    existing = session.table(str(dbt.this)) if dbt.is_incremental else None
    return append_rows(spec, src, transactions, existing)


def _empty(session: SparkSession, spec: HxSpec, like: DataFrame) -> DataFrame:
    types = dict(like.dtypes)
    fields = [f"`{c}` {types[c]}" for c in spec.columns]
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
    keys = touched.select(*[_q(k) for k in key]).distinct().localCheckpoint()
    # The touched keys' range of the first key column, as a filter Delta can skip files with
    # (a semi join alone reads the whole table).
    in_range = _key_range(keys, key[0])
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
        rec_keys = src.touched(rows, rec).select(*[_q(k) for k in key]).distinct()
        points = src.change_points(rows.join(rec_keys, key, "left_semi"), rec)
        known = recorded + [a.select(*_hx_state(cols), _order(TXN_ID, None)) for a in appended]
        if known:
            hx_rows = reduce(DataFrame.unionByName, known).join(rec_keys, key, "left_semi")
        else:  # a first build: nothing recorded yet
            hx_rows = points.where(F.lit(False)).select(
                *[_q(c) for c in cols],
                F.col("t").alias(MOD_TIME),
                F.col("c_deleted").alias(DELETED),
                _order(None, None),
            )
        rows_r = corrections(points, hx_rows, key, cols).select(
            *[_q(c) for c in cols],
            MOD_TIME,
            DELETED,
            F.lit(rec.author).cast("string").alias(MOD_USER),
            F.lit(rec.txn_id).cast("bigint").alias(TXN_ID),
        )
        appended.append(rows_r.localCheckpoint())

    out = reduce(DataFrame.unionByName, appended)
    # Ids in recording order: by transaction, then change time, then key (one window over new rows only).
    order = Window.orderBy(TXN_ID, MOD_TIME, *[_q(k) for k in key])
    out = out.withColumn(spec.hx_id, (F.row_number().over(order) + F.lit(last_id)).cast("bigint")).localCheckpoint()
    for fk in spec.foreign_keys:
        out = resolve_foreign_key(out, fk, narrow=existing is not None)
    return out.select(*[_q(c) for c in spec.output_columns])


def _key_range(keys: DataFrame, column: str) -> Column:
    lo, hi = keys.agg(F.min(_q(column)), F.max(_q(column))).collect()[0]  # one row
    if lo is None:
        return F.lit(False)
    return _q(column).between(F.lit(lo), F.lit(hi))


def _hx_state(cols: Sequence[str]) -> list:
    return [*[_q(c) for c in cols], F.col(MOD_TIME), F.col(DELETED)]


def _order(txn: str | None, row_id: str | None) -> Column:
    """Recording order of an `_hx` row: (transaction, id); rows of this run have no id yet and a
    larger transaction than any recorded row."""

    def part(name):
        return F.col(name).cast("bigint") if name else F.lit(None).cast("bigint")

    return F.struct(part(txn).alias("txn"), part(row_id).alias("id")).alias("_ord")
