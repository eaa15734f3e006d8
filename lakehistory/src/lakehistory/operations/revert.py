"""Revert and undo: history tables returned to an earlier state as one new transaction.

    lakehistory.door.revert   # from lakehistory.revert and lakehistory.undo, through the door

History is kept. The new transaction n closes (valid_to = n) the current rows the earlier state
lacks and opens copies (valid_from = n) of that state's rows that are no longer current, in one
Delta MERGE per table. Each commit carries the transaction (operation 'revert') the way a batch's
commit does (ledger.py): a run stopped between a commit and its record is recorded by the next
writer, and the event history, the feature states and the `_hx` tables read a revert like any
other change.

    revert  tables as of transaction v: every row current then (valid_from <= v < valid_to)
    rewind  the same for chosen keys of one table (a list of keys, or a predicate): Naksha's
            "rewind back to any previous state" of a feature; the table's other keys stay
    undo    the keys one transaction changed, in every table it changed (or one), as they were
            before it; refused, naming the later transactions, when any of them changed one of
            those keys since

All the tables that change share the one transaction, as a sync's do (syncs.py): its id is
reserved first, with what was asked, and it is visible to readers once every table recorded it.
A run stopped before that is completed by asking the same again; until then no other transaction
comes to its tables (history/plan.py refuses them, naming the command). Asked again once complete, it
answers with the transaction that did it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, syncs, turn
from lakehistory.history.group import MERGE_SOURCE_COPY, SKIP_EMPTY_COMMITS, own_commit
from lakehistory.history.session import session_conf
from lakehistory.history.table import Versioning
from lakehistory.history.transactions import ABANDON, OPERATION_SYNC_PREFIX, syncs_relation
from lakehistory.history.writer import Writer
from lakehistory.names import VALID_FROM, VALID_TO
from lakehistory.sql import cols, q, same_key

REVERT_VIEW = "`__lh_revert`"
CHOSEN_VIEW = "`__lh_rewind_keys`"
SYSTEM_TIME = (VALID_FROM, VALID_TO)


@dataclass(frozen=True)
class Table:
    """A history table asked for: its model, its relation and its key."""

    model: str
    target: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Chosen:
    """The keys a rewind returns: key values (each a list in the key's column order), or a
    predicate over the table's columns (SQL the user wrote, as a model's `where` is)."""

    keys: tuple[tuple[Any, ...], ...] = ()
    where: str | None = None

    def __post_init__(self) -> None:
        if bool(self.keys) == bool(self.where):
            raise HistoryError("rewind: give exactly one of keys (a non-empty list of keys) or where (a predicate)")

    def as_request(self) -> dict[str, Any]:
        return {"keys": [list(k) for k in self.keys]} if self.keys else {"where": self.where}

    def describe(self) -> str:
        return f"{len(self.keys)} key(s)" if self.keys else f"the keys where {self.where}"


def revert(
    spark: SparkSession,
    writer: Writer,
    tables: Sequence[dict[str, Any]],
    versioning: Versioning,
    to_txn: int | None = None,
    undo_txn: int | None = None,
    named: bool = True,
    author: str | None = None,
    chosen_keys: Chosen | None = None,
    keep_captures: bool = False,
) -> dict[str, Any]:
    """For `lakehistory.revert` (`to_txn`) and `lakehistory.undo` (`undo_txn`), as `writer`.
    `tables`: the models asked for ({model, target, keys}); for an undo that names none (`named`
    false), every history model, of which it takes those the transaction changed. Returns the
    new transaction's id (None when the tables already are in the state asked for), its counts
    per model, and the tables of an undone transaction that are not history tables (a snapshot's
    capture), which it leaves as they are only when asked to (`keep_captures`): otherwise the
    undo of a transaction that captured an extract is refused, naming the captures. A rewind
    (`to_txn` with `chosen_keys`) returns only the chosen keys of its one table."""

    if versioning.append_only:
        raise HistoryError("an append-only history table (valid_from only) cannot be reverted")
    # each once, in the order asked
    asked_for = list({t["target"]: Table(t["model"], t["target"], tuple(t["keys"])) for t in tables}.values())
    if not asked_for:
        raise HistoryError("name the history models to revert: models is empty")
    operation = "undo" if undo_txn is not None else ("rewind" if chosen_keys is not None else "revert")
    if operation == "rewind" and len(asked_for) != 1:
        raise HistoryError("rewind: name one history model; the keys it returns are that table's")
    asked = int(to_txn if undo_txn is None else undo_txn)  # type: ignore[arg-type]
    request = _request(operation, asked, [t.model for t in asked_for] if named else None, chosen_keys)
    transactions = writer.transactions
    with turn.taking(spark, writer, operation, request) as my:
        spark = my.spark
        states = my.recover([t.target for t in asked_for])
        last_id = max(s.last_id for s in states.values())
        log = spark.table(transactions)
        # the start as text in the session's time zone (UTC), not in the Python process's
        started = F.date_format("started_at", "yyyy-MM-dd HH:mm:ss.SSS").alias("started")
        rows = log.where(F.col("txn_id") == F.lit(asked)).select("*", started).collect()  # a row per table of it
        if not rows or asked > last_id:
            raise HistoryError(f"there is no transaction {asked} (the last one is {last_id})")
        given_up = any(r.operation == ABANDON for r in rows)
        if operation == "undo":  # a sync given up: what its tables applied, as for any sync
            rows = [r for r in rows if r.operation != ABANDON]
            if not rows:
                raise HistoryError(f"undo: transaction {asked} is a sync given up before any table applied it")
        found = my.operations()
        stopped = my.stopped(found)
        done = next((o for o in reversed(found) if not o.waiting), None)
        if stopped is None and done is not None and _still_last(done, states):
            return _outcome(done.reserved.txn_id, {}, [], already=True)
        chosen, left = _chosen(asked_for, rows, operation, asked, named)
        if left and not keep_captures and stopped is None:
            raise HistoryError(_captures_message(asked, rows, left))
        if stopped is None:
            _check(spark, log, chosen, versioning, rows, operation, asked)
            _refuse_owed_or_partial(spark, transactions, chosen, states, rows, operation, asked, given_up)
        at = _version(versioning, rows[0])
        todo = chosen if stopped is None else [t for t in chosen if t.target in stopped.waiting]
        frames = {t.target: _frame(spark, t, versioning, operation, at, chosen_keys) for t in todo}
        counts = {target: close_open_counts(frame) for target, frame in frames.items()}
        if stopped is None:
            changing = [t for t in todo if counts[t.target] != (0, 0)]
            if not changing:
                return _outcome(None, {}, left)
            reservation = my.reserve([t.target for t in changing], author, states[changing[0].target])
            todo = changing
        else:
            reservation = stopped
        by_table = {r.history_table: r for r in rows}
        sources = _source_tables(log, [t.target for t in todo])
        of_target = {t.target: t for t in todo}

        def merged(target: str) -> ledger.Commit:
            table = of_target[target]
            new = _txn(table, counts[target], reservation, by_table.get(target), sources, operation, asked, chosen_keys)
            return _merge(spark, table, versioning, frames[target], new)

        my.commit([t.target for t in todo], merged)
        txn_id = reservation.reserved.txn_id
        return _outcome(txn_id, {t.model: counts[t.target] for t in todo}, left)


def _refuse_owed_or_partial(
    spark: SparkSession,
    transactions: str,
    chosen: list[Table],
    states: dict[str, ledger.Recorded],
    rows: list[Any],
    operation: str,
    asked: int,
    given_up: bool,
) -> None:
    """Refuse, before anything is reserved: a table that owes a sync reserved before this
    operation (syncs.owed), and an undo of a sync that not every table of it has applied yet
    (undone in part, its other tables would apply it later, undone by nobody), unless it was
    given up (operations/abandon.py): no other table applies it then."""
    for table in chosen:
        state = states.get(table.target) or ledger.recorded(spark, transactions, table.target)
        if owed := syncs.owed(spark, transactions, table.target, state):
            raise HistoryError(syncs.owed_message(operation, table.model, owed))
    sync_id = next((r.sync_id for r in rows if r.sync_id), None)
    if operation != "undo" or given_up or sync_id is None or sync_id.startswith(OPERATION_SYNC_PREFIX):
        return
    held = spark.table(syncs_relation(transactions)).where(F.col("sync_id") == F.lit(sync_id)).select("tables")
    tables = {t for r in held.collect() for t in r.tables}  # one row, the sync's reservation
    missing = sorted(tables - {r.source_table for r in rows if r.source_table})
    if missing:
        raise HistoryError(
            f"undo of transaction {asked} refused: it is sync {sync_id}, which {', '.join(missing)} have not applied"
            " yet, so only part of it would be undone. Apply it to every table of the sync first (run their"
            " models), or, if their batches will never land, give it up (dbt run-operation"
            f" lakehistory.abandon_sync --args '{{sync_id: {json.dumps(sync_id)}}}'), then undo it."
            " Nothing was changed."
        )


def _request(operation: str, asked: int, models: list[str] | None, chosen: Chosen | None = None) -> str:
    """What was asked, as the dbt arguments that ask it again (JSON, compared as text)."""
    if operation == "revert":
        return json.dumps({"operation": operation, "models": models, "to_version": asked})
    if operation == "rewind" and models and chosen is not None:
        return json.dumps(
            {"operation": operation, "model": models[0], "to_version": asked, **chosen.as_request()}, default=str
        )
    return json.dumps({"operation": operation, **({"model": models[0]} if models else {}), "txn_id": asked})


def _outcome(
    txn_id: int | None, counts: dict[str, tuple[int, int]], left: list[str], already: bool = False
) -> dict[str, Any]:
    return {
        "transaction": txn_id,
        "tables": {model: {"versions_closed": c[0], "versions_opened": c[1]} for model, c in counts.items()},
        "left_as_they_are": left,
        "already_done": already,
    }


def _still_last(done: syncs.Operation, states: dict[str, ledger.Recorded]) -> bool:
    """Whether the same revert or undo, asked before, is the last transaction of each of its
    tables: asked again, it is done already. (Asked after later changes, a revert runs again and
    an undo is refused, as any undo of keys changed since is.)"""
    return all(t in states and states[t].history_last_id == done.reserved.txn_id for t in done.reserved.sync.tables)


def _chosen(
    asked_for: list[Table], rows: list[Row], operation: str, asked: int, named: bool
) -> tuple[list[Table], list[str]]:
    """The tables to change, and (for an undo) the tables of the transaction it leaves as they are."""
    if operation in ("revert", "rewind"):
        return asked_for, []
    changed = {r.history_table for r in rows if r.versions_opened or r.versions_closed}
    chosen = [t for t in asked_for if t.target in changed]
    if named and not chosen:
        raise HistoryError(
            f"transaction {asked} did not change {asked_for[0].target}: it is a {rows[0].operation} of"
            f" {', '.join(sorted(changed))}"
        )
    left = sorted(changed - {t.target for t in asked_for}) if not named else []
    return chosen, left


def _captures_message(asked: int, rows: list[Row], left: list[str]) -> str:
    captured = ", ".join(f"{r.history_table} (extract {r.batch_id})" for r in rows if r.history_table in left)
    return (
        f"undo of transaction {asked} refused: it also captured {captured}, which an undo cannot take back"
        " (a daily extract states the whole table: the next extract restates it). Nothing was changed. To undo"
        " the transaction's history tables as one transaction and keep the captures, run it again with"
        " keep_captures: true; to correct an extract, land a corrected one."
    )


def _check(
    spark: SparkSession,
    log: DataFrame,
    chosen: list[Table],
    versioning: Versioning,
    rows: list[Row],
    operation: str,
    asked: int,
) -> None:
    """Refuse what cannot be restored exactly, naming why, before anything is written."""
    by_table = {r.history_table: r for r in rows}
    _refuse_after_cleanup(log, [t.target for t in chosen], asked - 1 if operation == "undo" else asked)
    for table in chosen:
        if operation == "undo":
            txn = by_table[table.target]
            if txn.operation not in ("batch", "edit", "revert"):
                raise HistoryError(f"{table.target}: transaction {asked} is a {txn.operation}, which is not undone")
            _refuse_later_changes(spark, log, table.target, table.keys, versioning, txn)


def _frame(
    spark: SparkSession, table: Table, versioning: Versioning, operation: str, at: str, chosen: Chosen | None = None
) -> DataFrame:
    """The table's rows to close and to copy (see changes_sql), fixed (a local checkpoint)."""
    leaving, coming = _undo_rows(versioning, at) if operation == "undo" else revert_rows(versioning, at)
    stored = spark.table(table.target)
    row = [c for c in stored.columns if c not in SYSTEM_TIME]
    rows = table.target
    if chosen is not None and chosen.where is not None:
        rows = f"(select * from {table.target} where {chosen.where})"
    elif chosen is not None:
        # the keys are data: a DataFrame of the key's types, never text in the statement
        types = dict(stored.dtypes)
        given = spark.createDataFrame([list(k) for k in chosen.keys], ", ".join(f"{q(k)} string" for k in table.keys))
        typed = given.select(
            *[F.col(q(k)).cast(types[k]).alias(k) for k in table.keys],
            F.array(*[F.col(q(k)) for k in table.keys]).alias("_lh_given"),
        )
        unread = typed.where(" or ".join(f"{q(k)} is null" for k in table.keys)).limit(1).collect()
        if unread:
            raise HistoryError(
                f"rewind: key {unread[0]['_lh_given']} of {table.model} is not of its key's types"
                f" ({', '.join(f'{k} {types[k]}' for k in table.keys)}); nothing was changed"
            )
        typed.drop("_lh_given").createOrReplaceTempView(CHOSEN_VIEW.strip("`"))
        on = same_key("h", "k", table.keys)
        rows = f"(select * from {table.target} as h left semi join {CHOSEN_VIEW} as k on {on})"
    try:
        return spark.sql(changes_sql(rows, table.keys, row, leaving, coming)).localCheckpoint()
    finally:
        spark.catalog.dropTempView(CHOSEN_VIEW.strip("`"))


def close_open_counts(frame: DataFrame) -> tuple[int, int]:
    """(rows to close, rows to open)."""
    counts = frame.agg(F.count_if("_lh_close").alias("closed"), F.count_if(~F.col("_lh_close")).alias("opened"))
    closed, opened = counts.collect()[0]  # an aggregate: one row
    return int(closed), int(opened)


def _txn(
    table: Table,
    counts: tuple[int, int],
    reservation: syncs.Operation,
    undone: Row | None,
    sources: dict[str, str],
    operation: str,
    asked: int,
    chosen: Chosen | None = None,
) -> ledger.Txn:
    """The table's row of the reserved transaction (a rewind's too is a revert: the derived
    models read it as one)."""
    reserved = reservation.reserved
    what = {
        "revert": f"revert to transaction {asked}",
        "rewind": f"rewind of {chosen.describe() if chosen else 'keys'} to transaction {asked}",
        "undo": f"undo of transaction {asked}",
    }[operation]
    if operation == "undo" and undone is not None and undone.batch_id:
        what += f" (batch {undone.batch_id})"
    return ledger.Txn(
        txn_id=reserved.txn_id,
        batch_id=None,
        sequence=None,
        source_table=sources.get(table.target),
        author=reserved.sync.author,
        app_id=reserved.sync.app_id,
        commit_message=what,
        started_at=reserved.started_at,
        rows_in=0,
        versions_opened=counts[1],
        versions_closed=counts[0],
        rows_overlap_deleted=0,
        operation="revert",
        sync_id=reserved.sync.id,
    )


def _merge(
    spark: SparkSession, table: Table, versioning: Versioning, frame: DataFrame, new: ledger.Txn
) -> ledger.Commit:
    """One table's MERGE under the transaction `new`, whose commit carries it."""
    version = str(new.txn_id) if versioning.version_type == "integer" else f"timestamp'{new.started_at}'"
    row = [c for c in frame.columns if c not in (*SYSTEM_TIME, "_lh_close")]
    frame.createOrReplaceTempView(REVERT_VIEW.strip("`"))
    try:
        # The view is a local checkpoint: fixed, so Delta need not copy it before reading it twice.
        # A table that no longer changes (asked again after a stop) still commits its record.
        lock.check_held()
        conf = {
            ledger.USER_METADATA: ledger.commit_metadata([new]),
            MERGE_SOURCE_COPY: "none",
            SKIP_EMPTY_COMMITS: "false",
        }
        with session_conf(spark, conf):
            spark.sql(merge_sql(table.target, table.keys, row, versioning, version))
    finally:
        spark.catalog.dropTempView(REVERT_VIEW.strip("`"))
    return own_commit(spark, table.target, [new])


def _version(versioning: Versioning, txn: Row) -> str:
    """The history table's version value of a transaction, as SQL: its id, or its start."""
    if versioning.version_type == "integer":
        return str(int(txn.txn_id))
    return f"timestamp'{txn.started}'"


def revert_rows(versioning: Versioning, at: str) -> tuple[str, str]:
    """What leaves (current, opened after `at`) and what comes back (current at `at`, closed since)."""
    return (
        f"{versioning.is_current('h')} and h.`valid_from` > {at}",
        f"h.`valid_from` <= {at} and h.`valid_to` > {at} and not ({versioning.is_current('h')})",
    )


def _undo_rows(versioning: Versioning, at: str) -> tuple[str, str]:
    """What leaves (the rows the transaction at `at` opened, still current) and what comes back
    (those it closed): nothing later changed their keys (_refuse_later_changes)."""
    return f"h.`valid_from` = {at} and {versioning.is_current('h')}", f"h.`valid_to` = {at}"


def changes_sql(rows: str, keys: Sequence[str], row: Sequence[str], leaving: str, coming: str) -> str:
    """The rows to close (`_lh_close`) and to copy: those of `rows` (the table, or a rewind's part
    of it) leaving and coming, but a row that comes back as it leaves (same key, same Fivetran
    version, same values), which stays as it is."""
    same = " and ".join(
        [same_key("l", "c", keys), "l.`_fivetran_start` = c.`_fivetran_start`"]
        + [f"l.{q(c)} <=> c.{q(c)}" for c in row if c not in keys and c != "_fivetran_start"]
    )
    return f"""
        with
            leaving as (select * from {rows} as h where {leaving}),
            coming as (select * from {rows} as h where {coming})
        select l.*, true as `_lh_close` from leaving as l left anti join coming as c on {same}
        union all
        select c.*, false as `_lh_close` from coming as c left anti join leaving as l on {same}
    """


def merge_sql(
    target: str, keys: Sequence[str], row: Sequence[str], versioning: Versioning, version: str, view: str = REVERT_VIEW
) -> str:
    """The MERGE of the rows to close and to open (changes_sql's, as the view `view`) into `target`."""
    return f"""
        merge into {target} as t
        using {view} as s
        on s.`_lh_close` and {same_key("t", "s", keys)}
            and t.`_fivetran_start` = s.`_fivetran_start` and t.`valid_from` = s.`valid_from`
        when matched then update set t.`valid_to` = {version}
        when not matched and not s.`_lh_close` then
            insert ({cols(row)}, `valid_from`, `valid_to`) values ({cols(row, "s")}, {version}, {versioning.open})
    """


def _refuse_after_cleanup(log: DataFrame, targets: list[str], needed: int) -> None:
    """A cleanup after transaction `needed` may have removed rows of the state it asks for."""
    found = (
        log.where(
            F.col("history_table").isin(*targets)
            & (F.col("operation") == F.lit("cleanup"))
            & (F.col("txn_id") > F.lit(needed))
        )
        .select("history_table", "txn_id")
        .orderBy("history_table", "txn_id")
        .collect()  # one row per cleanup
    )
    if found:
        target = found[0].history_table
        cleanups = ", ".join(str(r.txn_id) for r in found if r.history_table == target)
        raise HistoryError(
            f"{target}: cleanup transaction(s) {cleanups} removed versions after transaction {needed}, so its state"
            " can no longer be restored exactly"
        )


def _refuse_later_changes(
    spark: SparkSession, log: DataFrame, target: str, keys: Sequence[str], versioning: Versioning, txn: Row
) -> None:
    """Undo only when no transaction after `txn` changed a key `txn` changed."""
    at = _version(versioning, txn)
    key_list = cols(keys)
    later = spark.sql(f"""
        select distinct l.`v` from (
            select distinct {key_list} from {target} where `valid_from` = {at} or `valid_to` = {at}
        ) as k
        inner join (
            select {key_list}, `valid_from` as `v` from {target} where `valid_from` > {at}
            union all
            select {key_list}, `valid_to` as `v` from {target} as h
            where h.`valid_to` > {at} and not ({versioning.is_current("h")})
        ) as l on {same_key("k", "l", keys)}
    """)
    column = "txn_id" if versioning.version_type == "integer" else "started_at"
    named = (
        log.join(later, F.col(column) == F.col("v"))
        .where(F.col("history_table") == F.lit(target))
        .select("txn_id", "batch_id")
        .orderBy("txn_id")
        .collect()  # one row per later transaction
    )
    if named:
        listed = ", ".join(f"{r.txn_id}" + (f" (batch {r.batch_id})" if r.batch_id else "") for r in named)
        raise HistoryError(
            f"{target}: transaction {txn.txn_id} cannot be undone on its own: later transactions changed the same"
            f" keys: {listed}. Undo those first, or revert the table to transaction {txn.txn_id - 1}"
            " (lakehistory.revert)."
        )


def _source_tables(log: DataFrame, targets: list[str]) -> dict[str, str]:
    """The landed table behind each of `targets`, from its batches' transactions."""
    rows = (
        log.where(F.col("history_table").isin(*targets) & F.col("source_table").isNotNull())
        .groupBy("history_table")
        .agg(F.max("source_table").alias("source_table"))
        .collect()  # a row per table
    )
    return {r.history_table: r.source_table for r in rows}
