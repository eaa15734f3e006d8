"""The one door between the package's macros and the engine.

Every `adapter.call_python` of the package goes through the macro `lakehistory._engine(entry,
arguments)` (macros/internal/engine.sql) to a function of this module: ruff, mypy and an editor
follow every call from here, and `tests/test_door.py` checks that each entry a macro names is
here and takes the arguments the macro passes. That macro also adds `context`, what the project
says once for every entry (its transactions table, writer lock, history tables, versioning,
database id, dbt invocation), built in one macro (`lakehistory._engine_context`).

SQL crosses the door in two places only (docs/decisions/0001). Three rules a user's query needs
as SQL and the engine runs too come back as SQL, each written once, here: the Naksha uuid, "the
transaction moved a row" and the history-FK resolution. A capture's or cleanup's statements and
the reads of the `lakehistory` command go in: the macros are their authors. Everything else that
crosses is names and values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from pyspark.sql import SparkSession

from lakehistory import derived, main_table
from lakehistory import invocation as invocations
from lakehistory.command import commands
from lakehistory.errors import LakehistoryError
from lakehistory.history import apply, ledger, syncs
from lakehistory.history import statements as writer_statements
from lakehistory.history import transactions as transactions_table
from lakehistory.history.table import Versioning
from lakehistory.history.uuids import database_id_of, naksha_uuid_sql, transaction_uuid_sql
from lakehistory.history.writer import Writer
from lakehistory.hx.foreign_keys import history_fk_sql
from lakehistory.invocation import Invocation, Project
from lakehistory.landing import extracts, run_reads, staging
from lakehistory.operations import abandon, branches, tags
from lakehistory.operations import revert as reverts


class ContextError(LakehistoryError, ValueError):
    pass


@dataclass(frozen=True)
class Context:
    """What the project says once, for every entry point (built by `lakehistory._engine_context`)."""

    transactions: str
    writer_lock: str
    invocation: Invocation
    writer_wait_seconds: float
    versioning: Versioning
    database_id: int
    project: Project

    @property
    def history_tables(self) -> tuple[str, ...]:
        return self.project.history_tables

    @property
    def writer(self) -> Writer:
        """The writer of the project's transactions table, for this invocation (history/writer.py)."""
        return Writer(
            transactions=self.transactions,
            lock=self.writer_lock,
            uuid_sql=self.uuid_sql,
            history_tables=self.history_tables,
            invocation=self.invocation,
            wait_seconds=self.writer_wait_seconds,
        )

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> Context:
        wanted = {f.name for f in fields(cls)} - {"project", "invocation"} | {"invocation_id"}
        if missing := wanted - set(given):
            raise ContextError(f"the engine's context lacks {', '.join(sorted(missing))}")
        try:
            wait = float(given["writer_wait_seconds"])
        except (TypeError, ValueError):
            raise ContextError(
                f"var lakehistory_writer_wait_seconds must be a number of seconds, not {given['writer_wait_seconds']!r}"
            ) from None
        invocation = invocations.of(str(given["invocation_id"] or ""))
        return cls(
            transactions=str(given["transactions"]),
            writer_lock=str(given["writer_lock"]),
            invocation=invocation,
            writer_wait_seconds=wait,
            versioning=Versioning(**{**dict(given["versioning"]), "open_end": str(given["versioning"]["open_end"])}),
            database_id=database_id_of(given["database_id"]),
            project=_project_of(given, invocation),
        )

    @property
    def uuid_sql(self) -> str:
        """A transaction's uuid, over the transactions table's `txn_id` and `started_at`."""
        return transaction_uuid_sql(self.database_id)


def _project_of(given: Mapping[str, Any], invocation: Invocation) -> Project:
    """The project the context sends, kept for the invocation's later calls when it is complete
    (dbt executes: its graph is read); else the one kept."""
    if "history_tables" not in given:
        if invocation.project is None:
            raise ContextError("the engine's context lacks history_tables")
        return invocation.project
    project = Project(
        history_tables=tuple(str(t) for t in given["history_tables"]),
        feature_state_inputs=frozenset(str(n) for n in given.get("feature_state_inputs") or ()),
    )
    if invocation.kept and given.get("project_complete") is True:
        invocation.project = project
    return project


def project_known(spark: SparkSession, context: Mapping[str, Any]) -> bool:
    """Whether the door keeps the project of this dbt invocation already (the macro then walks
    dbt's graph no more)."""
    kept = invocations.known(str(context.get("invocation_id") or ""))
    return kept is not None and kept.project is not None


# -- landing ---------------------------------------------------------------------------------------


def landing_read_for_run(spark: SparkSession, context: Mapping[str, Any]) -> bool:
    """Whether this dbt invocation's first staging has read the landing of all its tables already
    (the macro then sends no table list)."""
    return run_reads.known(Context.of(context).invocation)


def stage_batches(
    spark: SparkSession,
    context: Mapping[str, Any],
    view: str,
    landing_root: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[Sequence[str]],
    run_tables: Sequence[Sequence[str]],
    model_id: str,
    not_null: Sequence[str],
    history_table: str | None = None,
    project_tables: Sequence[Sequence[str]] = (),
    edits_from: str | None = None,
) -> None:
    """A landed table's pending batches, read, validated and typed, as the temp view `view`.
    `model_id`: the model that stages them (feature states built from it need each batch's
    application, seed 002). `not_null`: the columns
    the source declares NOT NULL. `history_table`: the history table they are staged for (None:
    the staging feeds no history model), whose own record says which batches are applied.
    `project_tables`: every landed table something of the project applies (run_reads.py), sent
    with `run_tables` by the invocation's first staging. `edits_from`: the main table built from
    the history table, whose edits are staged among the batches (landing/edits.py)."""
    ctx = Context.of(context)
    staging.register_pending_batches(
        spark,
        view,
        landing_root,
        table,
        key,
        columns,
        ctx.transactions,
        ctx.invocation,
        run_tables,
        model_id in ctx.project.feature_state_inputs,
        not_null,
        history_table or None,
        project_tables,
        edits_from or None,
        ctx.versioning.is_current("h"),
    )


def refresh_main_table(
    spark: SparkSession,
    context: Mapping[str, Any],
    target: str,
    staged: str,
    keys: Sequence[str],
    history: str | None,
    not_null: Sequence[str],
    checks: Sequence[Sequence[str]],
) -> dict[str, int]:
    """The strategy `main_table`: `target` made equal to the model's rows (lakehistory.main_table)."""
    ctx = Context.of(context)
    if ctx.versioning.append_only and history:
        raise main_table.MainTableError(
            f"{target}: a main table takes people's corrections, which an append-only history"
            f" ({history}, var lakehistory_append_only) refuses. Build it as a view of the _hx table."
        )
    return main_table.refresh(spark, ctx.invocation.id, target, staged, keys, history, not_null, checks)


def stage_extract(
    spark: SparkSession,
    context: Mapping[str, Any],
    staged: str,
    landing_root: str,
    table: str,
    key: Sequence[str],
    columns: Sequence[Sequence[str]],
    snapshot: str,
) -> str | None:
    """The next extract a snapshot captures, typed and validated, in the Delta table `staged`;
    refused, before the snapshot merges anything, when it belongs to a sync given up."""
    ctx = Context.of(context)
    day = extracts.stage_next_extract(
        spark, staged, landing_root, table, key, columns, snapshot, ctx.transactions, ctx.invocation
    )
    sync = extracts.staged_sync(ctx.invocation, snapshot)
    if sync is not None and (abandoned := syncs.given_up(spark, ctx.transactions, sync.id)) is not None:
        raise extracts.ExtractError(abandoned.abandoned_message(f"The extract {table}/{day}"))
    return day


# -- history ---------------------------------------------------------------------------------------


def ensure_transactions_table(spark: SparkSession, context: Mapping[str, Any]) -> None:
    """The transactions and syncs tables, made or brought to the current layout."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)


def apply_pending(
    spark: SparkSession,
    context: Mapping[str, Any],
    target: str,
    staged: str,
    keys: Sequence[str],
    deleted_column: str | None,
    exists: bool,
    max_batches_per_commit: int | None,
) -> dict[str, int]:
    """The strategy `fivetran_history`: the staged batches applied to `target`, each a transaction."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)
    return apply.apply_pending(
        spark,
        ctx.writer,
        target=target,
        staged=staged,
        keys=keys,
        deleted_column=deleted_column,
        versioning=ctx.versioning,
        exists=exists,
        max_batches_per_commit=max_batches_per_commit,
    )


def run_transaction(
    spark: SparkSession,
    context: Mapping[str, Any],
    statements: Sequence[str],
    row: str,
    versioned: str,
    capture_of: str | None,
) -> int:
    """A snapshot capture's or a cleanup's statements and row, as the next transaction."""
    ctx = Context.of(context)
    return writer_statements.run_transaction(
        spark, ctx.writer, statements=statements, row=row, versioned=versioned, capture_of=capture_of
    )


def revert(
    spark: SparkSession,
    context: Mapping[str, Any],
    tables: Sequence[Mapping[str, Any]],
    named: bool,
    author: str | None,
    to_txn: int | None = None,
    undo_txn: int | None = None,
    keys: Sequence[Sequence[Any]] | None = None,
    where: str | None = None,
    keep_captures: bool = False,
) -> dict[str, Any]:
    """History tables returned to a past transaction, chosen keys of one (a rewind: `keys` or
    `where`), or one transaction undone, as one new transaction."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)
    return reverts.revert(
        spark,
        ctx.writer,
        tables=[dict(t) for t in tables],
        versioning=ctx.versioning,
        to_txn=to_txn,
        undo_txn=undo_txn,
        named=named,
        author=author,
        chosen_keys=None if keys is None and where is None else reverts.Chosen(tuple(map(tuple, keys or ())), where),
        keep_captures=keep_captures,
    )


def abandon_sync(
    spark: SparkSession, context: Mapping[str, Any], sync_id: str, author: str | None, reason: str | None
) -> dict[str, Any]:
    """A reserved sync some table will never apply, given up so the consistent cut moves past it."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)
    return abandon.abandon_sync(spark, ctx.writer, sync_id=str(sync_id), author=author, reason=reason)


def tag(
    spark: SparkSession,
    context: Mapping[str, Any],
    name: str,
    txn_id: int,
    visible_txn_id: int,
    author: str | None,
    note: str | None,
) -> dict[str, Any]:
    """Name a transaction: every table as of it, kept by cleanup and retention."""
    ctx = Context.of(context)
    return tags.tag(spark, ctx.writer, name, int(txn_id), int(visible_txn_id), author, note)


def ensure_tags_table(spark: SparkSession, context: Mapping[str, Any]) -> str:
    """The tags table, made when missing (for cleanup and retention, which keep what tags need)."""
    ctx = Context.of(context)
    return tags.ensure_tags_table(spark, ctx.transactions)


def ensure_table(spark: SparkSession, context: Mapping[str, Any], relation: str, statement: str) -> None:
    """A table the package's macros make (a cleanup's purged keys), by `statement` (a CREATE TABLE
    IF NOT EXISTS the macro wrote), completed when a creation of it was cut short."""
    Context.of(context)
    transactions_table.create_if_missing(spark, relation, statement)


def drop_tag(spark: SparkSession, context: Mapping[str, Any], name: str) -> bool:
    """Drop a tag; whether there was one."""
    ctx = Context.of(context)
    return tags.drop_tag(spark, ctx.writer, name)


def create_branch(
    spark: SparkSession,
    context: Mapping[str, Any],
    name: str,
    schema: str,
    branch_transactions: str,
    tables: Sequence[Mapping[str, Any]],
    fork: int,
    visible_txn_id: int,
) -> dict[str, Any]:
    """A branch: the project's history tables and snapshots shallow-cloned as of transaction `fork`."""
    ctx = Context.of(context)
    branch = branches.Branch(branches.check_name(name), branch_transactions)
    return branches.create(spark, ctx.writer, branch, schema, [dict(t) for t in tables], int(fork), int(visible_txn_id))


def publish_branch(
    spark: SparkSession,
    context: Mapping[str, Any],
    name: str,
    schema: str,
    branch_transactions: str,
    tables: Sequence[Mapping[str, Any]],
    author: str | None,
) -> dict[str, Any]:
    """A branch's transactions made one transaction of main; the branch dropped."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)
    branch = branches.Branch(branches.check_name(name), branch_transactions)
    return branches.publish(spark, ctx.writer, branch, schema, [dict(t) for t in tables], ctx.versioning, author)


def drop_branch(
    spark: SparkSession, context: Mapping[str, Any], name: str, schema: str, branch_transactions: str
) -> bool:
    """Drop a branch's schema; whether there was one."""
    ctx = Context.of(context)
    branch = branches.Branch(branches.check_name(name), branch_transactions)
    return branches.drop(spark, ctx.writer, branch, schema)


def list_branches(
    spark: SparkSession, context: Mapping[str, Any], found: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each branch of this lakehouse among the schemas `found` (as `_branch` gives each): its fork,
    and whether it can be published now, with the reason when not."""
    ctx = Context.of(context)
    ledger.ensure_transactions_table(spark, ctx.transactions, ctx.invocation)
    given = [
        (
            branches.Branch(str(b["name"]), str(b["branch_transactions"])),
            str(b["schema"]),
            [dict(t) for t in b["tables"]],
        )
        for b in found
        if branches.NAME.fullmatch(str(b["name"]))
    ]
    return branches.listed(spark, ctx.writer, given)


# -- the lakehistory command -------------------------------------------------------------------------


def inspect(
    spark: SparkSession,
    context: Mapping[str, Any],
    command: str,
    args: Mapping[str, Any],
    tables: Sequence[Mapping[str, Any]],
    visible_sql: str,
    incomplete_syncs_sql: str,
) -> None:
    """The `lakehistory` command's answer, printed."""
    ctx = Context.of(context)
    commands.run(
        spark,
        command,
        dict(args),
        [dict(t) for t in tables],
        ctx.transactions,
        ctx.versioning.version_type,
        visible_sql,
        incomplete_syncs_sql,
    )


# -- shared rules, for the macros of the derived tables ---------------------------------------------


def follow_history(
    spark: SparkSession,
    context: Mapping[str, Any],
    table: str,
    history: str,
    kind: str,
    columns: Sequence[str],
    own_columns: Mapping[str, str],
    incremental: bool,
) -> list[str]:
    """While dbt compiles an events or states model (`kind`) over `history`: on an incremental
    build, the data columns `history` gained since `table` was last built are added to it (spec
    rule 17), as the `_hx` builds add them, then the model's own columns (name to type) `table`
    lacks, made by an earlier release of lakehistory, and the CHECK constraints of columns the
    history table no longer holds NOT NULL are dropped. Returns the columns added. The history
    table is remembered for the model's post-hook (`carry_not_null`)."""
    ctx = Context.of(context)
    follows = derived.Derived(history, tuple(columns), kind)
    derived.compiled(ctx.invocation, table, follows)
    if not incremental:
        return []
    derived.loosen_not_null(spark, table, follows)
    added = derived.take_new_columns(spark, table, columns, lambda: dict(spark.table(history).dtypes))
    return added + derived.take_new_columns(spark, table, list(own_columns), lambda: dict(own_columns))


def carry_not_null(spark: SparkSession, context: Mapping[str, Any], table: str) -> list[str]:
    """The post-hook of an events or states model: the NOT NULL columns of its history table
    become CHECK constraints of `table` (lakehistory.derived)."""
    return derived.carry_not_null(spark, Context.of(context).invocation, table)


def moved_rows_sql(spark: SparkSession, context: Mapping[str, Any], alias: str) -> str:
    """Whether a transaction (alias `alias` of the transactions table) opened, closed or purged a
    row of its history table: the `_hx` builds' rule, for the derived models' macros."""
    return transactions_table.moved_rows(alias)


def naksha_uuid(
    spark: SparkSession, context: Mapping[str, Any], object_id: str, at: str, object_type: int | str
) -> str:
    """The Naksha uuid expression (lakehistory.history.uuids) the engine writes transactions with."""
    return naksha_uuid_sql(object_id, at, object_type, Context.of(context).database_id)


def hx_resolved_sql(
    spark: SparkSession, context: Mapping[str, Any], relation: str, foreign_keys: Sequence[Mapping[str, Any]]
) -> str:
    """Every row of the `_hx` table `relation` with each history foreign key resolved against the
    parent rows known now, by the rule its build resolves with (`history_fk_sql`). `foreign_keys`:
    {columns, parent, parent_columns, parent_id, resolved_as} each."""
    resolved = f"(select * from {relation})"
    for fk in foreign_keys:
        resolved = "(" + history_fk_sql(resolved, **dict(fk)) + ")"
    return resolved
