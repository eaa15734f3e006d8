"""Branches: write a risky sync or a backfill beside main, test it there, publish it as one
transaction of main or drop it (seed 002: "snapshots ..., tagging, branching and views";
write-audit-publish).

    lakehistory.door.create_branch, publish_branch, drop_branch   # from the macros of the same names

A branch is a schema, `<schema>__<name>`, that a dbt target points at; the schema's comment says
whose branch it is (`owner`), written first, so that nothing here touches a schema it did not
create. Creating it shallow-clones (Delta: the new table's log names the files of the old one,
nothing is copied) every history table and every snapshot of extracts at its Delta version as of
the fork, a transaction visible then (its latest version when no transaction after the fork
changed it), and the transactions, syncs and tags tables cut to the fork. Runs on the branch apply
what main had not applied at the fork, under ids after it; the tables derived from the history
(`_hx`, events, states, main tables) are built there from the branch's history. Main's readers
never see the branch: it is another schema.

Publishing makes the branch's transactions one transaction n of main, under main's writer lock,
reserved as a revert's is (syncs.reserve_operation), so a stop is completed by asking again:

- per history table, in one MERGE: the rows the branch closed are closed at n, the rows it opened
  and still holds current are opened at n (a version the branch opened and closed again was
  never current at any version main will have, so it is not copied); its commit carries n;
- per snapshot of extracts: the branch's captures' rows, merged by `dbt_scd_id`;
- the branch's transaction rows are recorded under n, with the counts on one row per table, so
  that main counts their batches and extracts as applied and the derived models read n once.

It is refused when main moved in a way that conflicts: a transaction of a table the branch
changed after the fork, a sync the branch applied that main has reserved, a sync the branch
applied to only some of its tables, a table new on the branch (a publish changes main's tables, it
does not make them), and a cleanup or a given-up sync on the branch. A published
branch is dropped; its transactions stay, under n, in main's log.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, syncs, turn
from lakehistory.history.group import MERGE_SOURCE_COPY, SKIP_EMPTY_COMMITS, own_commit
from lakehistory.history.session import session_conf
from lakehistory.history.table import COLUMN_MAPPING, Versioning
from lakehistory.history.transactions import ABANDON, OPERATION_SYNC_PREFIX, beside, syncs_relation
from lakehistory.history.writer import Writer
from lakehistory.names import VALID_FROM, VALID_TO
from lakehistory.operations import revert
from lakehistory.operations.tags import tags_relation
from lakehistory.sql import cols, lit, q
from lakehistory.transaction_parts import PART_FIELDS, PARTS

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# The branch's transactions table says what it is in this table property (JSON).
PROPERTY = "lakehistory.branch"
# The branch's schema says whose branch it is in its comment (JSON with this key), written first.
OWNER = "lakehistory_branch_of"
PUBLISH_VIEW = "__lh_publish"
# a transaction's start as text in the session's time zone (UTC), as the syncs table gives it
_TEXT = "yyyy-MM-dd HH:mm:ss.SSS"


@dataclass(frozen=True)
class Table:
    """A table a branch holds: its model, its relation on main and on the branch, its key, and
    its kind ('history' or 'snapshot', a dbt snapshot of daily extracts)."""

    model: str
    target: str
    branch: str
    keys: tuple[str, ...]
    kind: str

    @classmethod
    def of(cls, given: dict[str, Any]) -> Table:
        return cls(str(given["model"]), str(given["target"]), str(given["branch"]), tuple(given["keys"]), given["kind"])


@dataclass(frozen=True)
class Branch:
    """The branch `name`: its transactions table (with its syncs and tags tables beside it)."""

    name: str
    transactions: str

    def described(self, spark: SparkSession) -> dict[str, Any] | None:
        """What the branch's creation wrote (PROPERTY), None for no branch or one cut short."""
        if not spark.catalog.tableExists(self.transactions.replace("`", "")):
            return None
        found = [r.value for r in spark.sql(f"show tblproperties {self.transactions}").collect() if r.key == PROPERTY]
        return json.loads(found[0]) if found else None


def owner(spark: SparkSession, schema: str) -> dict[str, Any] | None:
    """Whose branch the schema is: what its creation wrote first, in the schema's comment (the
    lakehouse's transactions table, the branch's name and id); None for a schema lakehistory did
    not create, or none at all."""
    if not spark.catalog.databaseExists(schema):
        return None
    try:
        said = json.loads(spark.catalog.getDatabase(schema).description or "")
    except ValueError:
        return None
    return said if isinstance(said, dict) and OWNER in said else None


def _refuse_foreign(spark: SparkSession, branch: Branch, schema: str, transactions: str, what: str) -> None:
    """A schema of the branch's name that is not a branch of this lakehouse is never touched."""
    if not spark.catalog.databaseExists(schema):
        return
    found = owner(spark, schema)
    if found is None or found[OWNER] != transactions:
        whose = "another lakehouse's branch" if found else "not a branch lakehistory created"
        raise HistoryError(
            f"{what} branch {branch.name}: the schema {schema} exists and is {whose}; lakehistory creates and drops"
            " only the schemas of its own branches. Choose another name, or rename that schema. Nothing was changed."
        )


def children(spark: SparkSession, transactions: str, schema: str) -> list[str]:
    """The schemas of the branches made from the branch of `schema` (its transactions table
    `transactions`): each is named `<schema>__<name>`."""
    prefix = f"{schema}__"
    found = spark.catalog.listDatabases(f"{schema}__*")  # a pattern of names: the catalog's listing
    return sorted(
        d.name for d in found if d.name.startswith(prefix) and (owner(spark, d.name) or {}).get(OWNER) == transactions
    )


def _refuse_children(spark: SparkSession, branch: Branch, schema: str, what: str) -> None:
    if found := children(spark, branch.transactions, schema):
        raise HistoryError(
            f"{what} branch {branch.name} refused: the branch(es) {', '.join(found)} were made from it and read its"
            " tables. Publish or drop them first. Nothing was changed."
        )


def check_name(name: str) -> str:
    if not NAME.fullmatch(name or ""):
        raise HistoryError(
            f"branch {name!r}: a branch's name is 1 to 40 lower-case letters, digits or '_', starting with a letter"
            " (it names the branch's schema)"
        )
    return name


# -- create ------------------------------------------------------------------------------------------


def create(
    spark: SparkSession,
    writer: Writer,
    branch: Branch,
    schema: str,
    tables: Sequence[dict[str, Any]],
    fork: int,
    visible_txn_id: int,
) -> dict[str, Any]:
    """Create `branch` (schema `schema`) from transaction `fork` of main (`writer`'s). Refused:
    a branch of that name already, and a transaction not visible yet. A creation cut short
    (no PROPERTY yet) is made anew."""
    check_name(branch.name)
    transactions = writer.transactions
    if branch.described(spark) is not None:
        raise HistoryError(
            f"branch {branch.name} exists already ({schema}): publish it or drop it first (lakehistory branch drop"
            f" {branch.name})"
        )
    chosen = [Table.of(dict(t)) for t in tables]
    with turn.taking(spark, writer, "create_branch") as my:
        spark = my.spark
        # a commit a stopped run left unrecorded is on record before the fork's versions are read
        my.recover_every(transactions)
        log = spark.table(transactions)
        last = log.agg(F.max("txn_id")).collect()[0][0] or 0
        if fork < 0 or fork > last:
            raise HistoryError(f"branch {branch.name}: there is no transaction {fork} (the last one is {last})")
        if fork > visible_txn_id:
            raise HistoryError(
                f"branch {branch.name}: transaction {fork} is not visible yet (the last visible one is"
                f" {visible_txn_id}): a branch from it would hold part of a sync"
            )
        # Per table, its Delta version as of the fork, None when no transaction after the fork
        # changed it: its latest version, which an OPTIMIZE or a VACUUM since leaves readable.
        versions = {
            r.history_table: None if r.changed_after is None else int(r.version)
            for r in log.groupBy("history_table")
            .agg(
                F.max(F.when(F.col("txn_id") <= F.lit(fork), F.col("delta_version"))).alias("version"),
                F.min(F.when(F.col("txn_id") > F.lit(fork), F.col("txn_id"))).alias("changed_after"),
            )
            .where(F.col("version").isNotNull())
            .collect()  # a row per table
        }
        started = log.where(F.col("txn_id") == F.lit(fork)).select(F.date_format("started_at", _TEXT)).limit(1)
        first = started.collect()
        fork_started = first[0][0] if first else None
        identity = {OWNER: transactions, "name": branch.name, "id": uuid.uuid4().hex}
        _refuse_foreign(spark, branch, schema, transactions, "create")
        spark.sql(f"drop schema if exists {q(schema)} cascade")  # a creation of this lakehouse's, cut short
        spark.sql(f"create schema {q(schema)} comment {lit(json.dumps(identity))}")
        cloned = []
        for table in chosen:
            if table.target in versions:
                version = versions[table.target]
                at = "" if version is None else f" version as of {version}"
                spark.sql(f"create table {table.branch} shallow clone {table.target}{at}")
                if gone := unreadable(spark, table.branch, table.target):
                    _drop_schema(spark, schema, branch)  # made by this creation a moment ago
                    raise HistoryError(
                        f"branch {branch.name}: {table.model} as of transaction {fork} cannot be read, {len(gone)}"
                        f" of its files ({gone[0]}{', ...' if len(gone) > 1 else ''}) were removed by a VACUUM of"
                        f" {table.target}. Create the branch from a later transaction. Nothing was changed."
                    )
                cloned.append(table.model)
        _clone_cut(spark, transactions, branch.transactions, fork)
        my.made_anew(branch.transactions)  # an earlier branch of the name may have had a ledger
        # On the branch, every transaction up to the fork names the branch's table, and is in the
        # clone's first version; an edit's sequence names a version of main's main table, which
        # the branch does not have.
        renamed = " ".join(f"when {lit(t.target)} then {lit(t.branch)}" for t in chosen)
        spark.sql(
            f"update {branch.transactions} set `delta_version` = 0,"
            f" `history_table` = case `history_table` {renamed} else `history_table` end,"
            " `batch_sequence` = case when `operation` = 'edit' then null else `batch_sequence` end"
        )
        _clone_cut(spark, syncs_relation(transactions), syncs_relation(branch.transactions), fork)
        if spark.catalog.tableExists(tags_relation(transactions).replace("`", "")):
            _clone_cut(spark, tags_relation(transactions), tags_relation(branch.transactions), fork)
        described = {
            "id": identity["id"],
            "name": branch.name,
            "of": transactions,
            "fork": fork,
            "fork_started": fork_started,
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        property_value = lit(json.dumps(described))  # names, ids and times: no data values
        spark.sql(f"alter table {branch.transactions} set tblproperties ({lit(PROPERTY)} = {property_value})")
    return {"branch": branch.name, "schema": schema, "fork": fork, "tables": cloned}


def _clone_cut(spark: SparkSession, source: str, target: str, fork: int) -> None:
    spark.sql(f"create table {target} shallow clone {source}")
    spark.sql(f"delete from {target} where `txn_id` > {int(fork)}")


def drop(spark: SparkSession, writer: Writer, branch: Branch, schema: str) -> bool:
    """Drop the branch's schema and its tables (main's files, which its clones name, stay).
    Refused: a schema that is not a branch of this lakehouse, a branch with a branch of its own,
    and one whose publish is reserved and not complete (asked again, it completes)."""
    if not spark.catalog.databaseExists(schema):
        return False
    with turn.taking(spark, writer, "drop_branch") as my:
        spark = my.spark
        _refuse_foreign(spark, branch, schema, writer.transactions, "drop")
        _refuse_children(spark, branch, schema, "drop of")
        branch_id = (owner(spark, schema) or {}).get("id")
        _refuse_stopped_publish(spark, writer.transactions, branch, branch_id, "drop of")
        _drop_checkpoints(spark, writer.transactions, branch_id)  # of a publish stopped before it reserved
        _drop_schema(spark, schema, branch)
    return True


def _drop_schema(spark: SparkSession, schema: str, branch: Branch) -> None:
    lock.forget(_writer_lock(branch))  # held when this process ran on the branch: its table goes too
    spark.sql(f"drop schema {q(schema)} cascade")


def _writer_lock(branch: Branch) -> str:
    return beside(branch.transactions, "writer")  # as the macro writer_lock_relation names it


def _recover_branch(spark: SparkSession, writer: Writer, branch: Branch, tables: Iterable[Table]) -> None:
    """A run on the branch killed after its commit left a transaction the branch's log lacks: the
    branch's own writer records it, under the branch's lock, before the publish reads that log
    (else main would take the rows without the record of their batch, and apply it again)."""
    on_branch = {t.target: t.branch for t in tables}
    own = Writer(
        transactions=branch.transactions,
        lock=_writer_lock(branch),
        uuid_sql=writer.uuid_sql,
        history_tables=tuple(on_branch[t] for t in writer.history_tables if t in on_branch),
        invocation=writer.invocation,
        wait_seconds=writer.wait_seconds,
    )
    with turn.taking(spark, own, "recover") as mine:
        mine.recover_every(branch.transactions)


def _branch_rows(spark: SparkSession, branch: Branch, fork: int) -> list[Row]:
    return _ordered(spark.table(branch.transactions).where(F.col("txn_id") > F.lit(fork)))


def _publishes(request: str, name: str, branch_id: str | None) -> bool:
    """Whether an operation's request is a publish of the branch `name` of id `branch_id`."""
    asked = json.loads(request or "{}")
    if asked.get("operation") != "publish_branch" or asked.get("name") != name:
        return False
    return asked.get(syncs.PRIVATE + "branch") in (None, branch_id)


# -- list --------------------------------------------------------------------------------------------


def listed(
    spark: SparkSession, writer: Writer, found: Sequence[tuple[Branch, str, Sequence[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """What `lakehistory branch list` shows of each branch of this lakehouse among `found` (a
    branch, its schema, its tables): its fork, its creation, and whether it can be published now,
    with the reason when not (the refusal a publish would give, nothing reserved or changed)."""
    shown = []
    for branch, schema, tables in found:
        if (owner(spark, schema) or {}).get(OWNER) != writer.transactions:
            continue
        described = branch.described(spark)
        row = {"branch": branch.name, "schema": schema, "fork": None, "created_at": None, "publishable": False}
        if described is None:
            shown.append({**row, "reason": "its creation was cut short: create it again, or drop it"})
            continue
        row.update(fork=described["fork"], created_at=described.get("created_at"))
        fork = int(described["fork"])
        by_branch = {t.branch: t for t in (Table.of(dict(x)) for x in tables)}
        try:
            _refuse_stopped_publish(spark, writer.transactions, branch, described.get("id"), "publish of")
            rows = _branch_rows(spark, branch, fork)
            _check_publishable(spark, writer.transactions, branch, schema, by_branch, fork, rows)
        except HistoryError as refused:
            shown.append({**row, "reason": str(refused).removesuffix(" Nothing was changed.")})
        else:
            shown.append({**row, "publishable": True, "reason": None})
    return shown


def _check_publishable(
    spark: SparkSession,
    transactions: str,
    branch: Branch,
    schema: str,
    by_branch: dict[str, Table],
    fork: int,
    rows: list[Row],
) -> None:
    """The refusals of a publish that reserved nothing yet (a HistoryError), each read afresh."""
    _refuse_children(spark, branch, schema, "publish of")
    if not rows:
        raise HistoryError(f"branch {branch.name} has no transaction after the fork ({fork}): nothing to publish")
    _refuse_branch_state(spark, branch, rows, by_branch, fork)
    changed = [by_branch[t] for t in dict.fromkeys(r.history_table for r in rows)]
    _refuse_new_tables(spark, branch, changed)
    _refuse_unreadable(spark, branch, changed)
    states = ledger.recorded_for(spark, transactions, [t.target for t in changed])
    _refuse_main_moved(spark, transactions, branch, rows, changed, states, fork)


def _refuse_stopped_publish(
    spark: SparkSession, transactions: str, branch: Branch, branch_id: str | None, what: str
) -> None:
    """A publish of the branch reserved and not complete is completed or given up first."""
    for stopped in syncs.operations(spark, transactions):
        if stopped.waiting and _publishes(stopped.request, branch.name, branch_id):
            raise HistoryError(
                f"{what} branch {branch.name} refused: its publish, transaction {stopped.reserved.txn_id} of main,"
                f" was stopped before {', '.join(stopped.waiting)} recorded it. Complete it (lakehistory branch"
                f" publish {branch.name}), or give it up ({stopped.give_up_command()}). Nothing was changed."
            )


# -- publish -----------------------------------------------------------------------------------------


def publish(
    spark: SparkSession,
    writer: Writer,
    branch: Branch,
    schema: str,
    tables: Sequence[dict[str, Any]],
    versioning: Versioning,
    author: str | None,
) -> dict[str, Any]:
    """Publish `branch` to main (`writer`'s) as one transaction; the branch is dropped after.
    What the publish writes to main (each table's rows to close and to open, and the branch's
    transaction rows) is checkpointed beside main's transactions table before the id is reserved:
    a publish stopped after it completes from there, even when its branch is gone."""
    if versioning.append_only:
        raise HistoryError(f"branch {branch.name}: an append-only history (valid_from only) cannot be published")
    described = branch.described(spark)
    by_branch = {t.branch: t for t in (Table.of(dict(x)) for x in tables)}
    transactions = writer.transactions
    if described is None:
        # the branch is gone: a publish of it stopped after its reservation completes from its checkpoints
        stopped_one = _stopped_publish(spark, transactions, branch.name)
        if stopped_one is None:
            raise HistoryError(f"there is no branch {branch.name} ({schema}): lakehistory branch create {branch.name}")
        request, branch_id, fork = stopped_one.request, _branch_id(stopped_one.request), -1
    else:
        branch_id, fork = described.get("id"), int(described["fork"])
        # as the macro is asked (syncs.Operation.stopped_message names the command from it), with
        # the branch's identity: a later branch of the same name is another publish
        request = json.dumps({"operation": "publish_branch", "name": branch.name, syncs.PRIVATE + "branch": branch_id})
    with turn.taking(spark, writer, "publish_branch", request) as my:
        spark = my.spark
        if described is not None:
            _refuse_children(spark, branch, schema, "publish of")
            _recover_branch(spark, writer, branch, by_branch.values())
        stopped = my.stopped()
        if stopped is not None:  # a table that committed it before the stop records it first
            my.recover(sorted(stopped.waiting))
        found = my.operations()
        stopped = my.stopped(found)
        # recorded by every table, then stopped before the branch was dropped (an earlier branch
        # of the same name was published before this one's fork)
        done = next((o for o in found if not o.waiting and o.reserved.txn_id > fork), None)
        if stopped is None and done is not None:
            _drop_checkpoints(spark, transactions, branch_id)
            if described is not None:
                _drop_schema(spark, schema, branch)
            return {"transaction": done.reserved.txn_id, "tables": {}, "already_done": True}
        kept = _checkpoint(transactions, branch_id, "log")
        if stopped is not None and spark.catalog.tableExists(kept.replace("`", "")):
            rows = _ordered(spark.table(kept))
        elif described is not None:
            rows = _branch_rows(spark, branch, fork)
        else:
            raise HistoryError(stopped_one.stopped_message() if stopped_one else f"there is no branch {branch.name}")
        changed = [by_branch[t] for t in dict.fromkeys(r.history_table for r in rows) if t in by_branch]
        states = my.recover([t.target for t in changed])
        targets = sorted(t.target for t in changed)
        if stopped is None:
            _check_publishable(spark, transactions, branch, schema, by_branch, fork, rows)
            assert described is not None
            _write_checkpoints(spark, transactions, branch, described, changed, versioning, rows)
            reservation = my.reserve(targets, author, states[changed[0].target])
            todo = changed
        else:
            reservation = stopped
            todo = [t for t in changed if t.target in stopped.waiting]
        counts: dict[str, tuple[int, int]] = {}
        of_target = {t.target: t for t in todo}

        def published(target: str) -> ledger.Commit:
            table = of_target[target]
            of_table = [r for r in rows if r.history_table == table.branch]
            kept = _checkpoint(transactions, branch_id, targets.index(target))
            if spark.catalog.tableExists(kept.replace("`", "")):
                frame = spark.table(kept)
            else:  # reserved by a lakehistory that wrote no checkpoints: read from the branch
                assert described is not None, "a publish without checkpoints completes from its branch"
                frame = _changes(spark, table, versioning, _fork_at(described, versioning), of_table).localCheckpoint()
            commit, counts[table.model] = _publish_table(spark, table, versioning, frame, of_table, reservation, branch)
            return commit

        my.commit([t.target for t in todo], published)
        txn_id = reservation.reserved.txn_id
        _drop_checkpoints(spark, transactions, branch_id)
        if described is not None:
            _drop_schema(spark, schema, branch)
    return {
        "transaction": txn_id,
        "tables": {m: {"versions_closed": c[0], "versions_opened": c[1]} for m, c in counts.items()},
        "already_done": False,
    }


# -- the publish's checkpoints -------------------------------------------------------------------------


def _checkpoint(transactions: str, branch_id: str | None, part: int | str) -> str:
    """A publish's checkpoint beside main's transactions table: `part` is the index of a table
    among the publish's tables (sorted, as its reservation lists them), or 'log'."""
    return beside(transactions, f"publish_{branch_id}_{part}")


def _write_checkpoints(
    spark: SparkSession,
    transactions: str,
    branch: Branch,
    described: dict[str, Any],
    changed: list[Table],
    versioning: Versioning,
    rows: list[Row],
) -> None:
    """Each table's rows to close and to open, and the branch's transaction rows, as Delta
    tables of main's schema (made again when a publish stopped before its reservation)."""
    fork, branch_id, at = int(described["fork"]), described.get("id"), _fork_at(described, versioning)
    targets = sorted(t.target for t in changed)
    for table in sorted(changed, key=lambda t: t.target):  # in the order of their parts: a stop leaves a prefix
        frame = _changes(spark, table, versioning, at, [r for r in rows if r.history_table == table.branch])
        frame.createOrReplaceTempView(PUBLISH_VIEW)
        try:
            relation = _checkpoint(transactions, branch_id, targets.index(table.target))
            spark.sql(
                f"create or replace table {relation} using delta"
                f" tblproperties ({COLUMN_MAPPING}) as select * from {q(PUBLISH_VIEW)}"
            )
        finally:
            spark.catalog.dropTempView(PUBLISH_VIEW)
    spark.sql(
        f"create or replace table {_checkpoint(transactions, branch_id, 'log')} using delta"
        f" as select * from {branch.transactions} where `txn_id` > {fork}"
    )


def _fork_at(described: dict[str, Any], versioning: Versioning) -> str:
    """The branch's fork as a version of its tables (SQL)."""
    if versioning.version_type == "integer":
        return str(int(described["fork"]))
    return f"timestamp'{described['fork_started'] or '0001-01-01'}'"


def _drop_checkpoints(spark: SparkSession, transactions: str, branch_id: str | None) -> None:
    """Every checkpoint of the branch's publish: the log, and the tables' parts 0, 1, ... (written
    in that order, so the first one missing ends them)."""
    spark.sql(f"drop table if exists {_checkpoint(transactions, branch_id, 'log')}")
    part = 0
    while spark.catalog.tableExists(_checkpoint(transactions, branch_id, part).replace("`", "")):
        spark.sql(f"drop table {_checkpoint(transactions, branch_id, part)}")
        part += 1


def drop_publish_checkpoints(spark: SparkSession, transactions: str, request: str | None) -> None:
    """The checkpoints of a publish given up (operations/abandon.py), by its reservation's
    request; nothing for another operation's."""
    if json.loads(request or "{}").get("operation") == "publish_branch":
        _drop_checkpoints(spark, transactions, _branch_id(request or ""))


def _branch_id(request: str) -> str | None:
    found = json.loads(request or "{}").get(syncs.PRIVATE + "branch")
    return None if found is None else str(found)


def _stopped_publish(spark: SparkSession, transactions: str, name: str) -> syncs.Operation | None:
    for stopped in syncs.operations(spark, transactions):
        asked = json.loads(stopped.request or "{}")
        if stopped.waiting and asked.get("operation") == "publish_branch" and asked.get("name") == name:
            return stopped
    return None


def _ordered(log: DataFrame) -> list[Row]:
    return log.orderBy("txn_id", "row_index").collect()  # a row per transaction and table of the branch


def _refuse_branch_state(
    spark: SparkSession, branch: Branch, rows: list[Row], by_branch: dict[str, Table], fork: int
) -> None:
    """What the branch did that main cannot take as one transaction."""
    for r in rows:
        if r.operation in ("cleanup", ABANDON):
            raise HistoryError(
                f"branch {branch.name}: its transaction {r.txn_id} is a {r.operation} of {r.history_table}, which"
                " is not published (run it on main). Nothing was changed."
            )
        if r.history_table not in by_branch:
            raise HistoryError(
                f"branch {branch.name}: its transaction {r.txn_id} changed {r.history_table}, which is not a history"
                " table or snapshot of this project's branch. Nothing was changed."
            )
    partial = spark.sql(
        f"""
        select s.`sync_id`, s.`txn_id`, array_except(s.`tables`, coalesce(d.`recorded`, array())) as `missing`
        from {syncs_relation(branch.transactions)} as s
        left join (
            select `txn_id`, array_union(collect_set(`source_table`), collect_set(`history_table`)) as `recorded`
            from {branch.transactions} where `txn_id` > {int(fork)} group by `txn_id`
        ) as d on d.`txn_id` = s.`txn_id`
        where s.`txn_id` > {int(fork)} and size(array_except(s.`tables`, coalesce(d.`recorded`, array()))) > 0
        order by s.`txn_id`
        """
    ).collect()  # the branch's syncs some table has not applied: a handful
    if partial:
        p = partial[0]
        raise HistoryError(
            f"branch {branch.name}: sync {p.sync_id} (its transaction {p.txn_id}) is not applied by"
            f" {', '.join(p.missing)} on the branch: published, it would be a sync main has only part of. Run those"
            " models on the branch first. Nothing was changed."
        )


def _refuse_new_tables(spark: SparkSession, branch: Branch, changed: list[Table]) -> None:
    """A table the branch made, which main does not have: its first versions are the branch's."""
    for table in changed:
        if not spark.catalog.tableExists(table.target.replace("`", "")):
            raise HistoryError(
                f"branch {branch.name} cannot be published: {table.model} is new on the branch (main has no"
                f" {table.target}), and a publish changes main's tables, it does not make them. Build the model on"
                " main, then create a branch from there. Nothing was changed."
            )


def unreadable(spark: SparkSession, clone: str, source: str) -> list[str]:
    """The files the shallow clone `clone` reads that are gone: a VACUUM of `source`, whose files
    they are, removed them. Only the files `source` no longer holds can be gone, and only their
    existence is checked (a listing each, no data read); a clone of `source`'s latest version
    costs two plans and nothing more."""
    own = set(spark.table(source).inputFiles())
    at_risk = sorted(set(spark.table(clone).inputFiles()) - own)
    if not at_risk or _all_there(spark, at_risk):
        return []
    return [f for f in at_risk if not _all_there(spark, [f])]


def _all_there(spark: SparkSession, files: list[str]) -> bool:
    try:  # a schema given: the reader checks that each path exists, and opens none
        _ = spark.read.schema("`_` int").parquet(*files).schema
    except Exception as exc:  # noqa: BLE001 - Spark raises its own analysis error, by Spark version
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return False
        raise
    return True


def _refuse_unreadable(spark: SparkSession, branch: Branch, tables: list[Table]) -> None:
    for table in tables:
        if gone := unreadable(spark, table.branch, table.target):
            raise HistoryError(_unreadable_message(branch, table, gone) + " Nothing was changed.")


def _unreadable_message(branch: Branch, table: Table, gone: list[str]) -> str:
    return (
        f"branch {branch.name} cannot be read: {len(gone)} file(s) its {table.model} reads are gone from main's"
        f" table ({gone[0]}{', ...' if len(gone) > 1 else ''}), removed by a VACUUM of {table.target} after an"
        " OPTIMIZE, a REORG or a cleanup rewrote them. Its changes cannot be published: drop it"
        f" (lakehistory branch drop {branch.name}) and make them again on a new branch."
    )


def _refuse_main_moved(
    spark: SparkSession,
    transactions: str,
    branch: Branch,
    rows: list[Row],
    changed: list[Table],
    states: dict[str, ledger.Recorded],
    fork: int,
) -> None:
    """Main moved since the fork in a way that conflicts with the branch."""
    # A cleanup removes closed versions only, never the current ones a publish closes: a cleanup
    # of main after the fork is no conflict.
    written = {
        r.history_table: int(r.last)
        for r in spark.table(transactions)
        .where((F.col("txn_id") > F.lit(fork)) & (F.col("operation") != F.lit("cleanup")))
        .where(F.col("history_table").isin(*[t.target for t in changed]))
        .groupBy("history_table")
        .agg(F.max("txn_id").alias("last"))
        .collect()  # a row per table
    }
    for table in changed:
        state = states[table.target]
        moved = max(written.get(table.target, 0), state.operation_reserved)
        if moved > fork:
            raise HistoryError(
                f"branch {branch.name} cannot be published: main's {table.model} has transaction {moved}, after the"
                f" branch's fork ({fork}), and the branch changed it too. Create a new branch from main as it is now"
                " and apply the change there. Nothing was changed."
            )
        if owed := syncs.owed(spark, transactions, table.target, state):
            raise HistoryError(syncs.owed_message("publish of branch " + branch.name, table.model, owed))
    synced = sorted({r.sync_id for r in rows if r.sync_id and not r.sync_id.startswith(OPERATION_SYNC_PREFIX)})
    if synced:
        taken = (
            spark.table(syncs_relation(transactions))
            .where(F.col("sync_id").isin(*synced))
            .select("sync_id", "txn_id")
            .collect()  # the branch's syncs main reserved: a handful
        )
        if taken:
            raise HistoryError(
                f"branch {branch.name} cannot be published: main applies sync {taken[0].sync_id} itself (transaction"
                f" {taken[0].txn_id}), which the branch applied too. Nothing was changed."
            )


def _changes(spark: SparkSession, table: Table, versioning: Versioning, at: str, rows: list[Row]) -> DataFrame:
    """What the branch changed of `table` since the fork: a history table's rows to close (those
    of main current at the fork the branch closed, `_lh_close`) and to open (those it opened and
    holds); a snapshot's versions its captures opened or closed."""
    if table.kind == "snapshot":
        return _snapshot_changes(spark, table, rows)
    came, left = revert.revert_rows(versioning, at)
    row = [c for c in spark.table(table.branch).columns if c not in (VALID_FROM, VALID_TO)]
    return spark.sql(revert.changes_sql(table.branch, table.keys, row, leaving=left, coming=came))


def _publish_table(
    spark: SparkSession,
    table: Table,
    versioning: Versioning,
    frame: DataFrame,
    rows: list[Row],
    reservation: syncs.Operation,
    branch: Branch,
) -> tuple[ledger.Commit, tuple[int, int]]:
    """One table's MERGE of its checkpointed changes (`frame`) into main under the reserved
    transaction; its commit and (closed, opened)."""
    reserved = reservation.reserved
    version = str(reserved.txn_id) if versioning.version_type == "integer" else f"timestamp'{reserved.started_at}'"
    _take_new_columns(spark, table, frame)
    if table.kind == "snapshot":
        columns = frame.columns
        merge = f"""
            merge into {table.target} as t
            using {q(PUBLISH_VIEW)} as s
            on t.`dbt_scd_id` = s.`dbt_scd_id`
            when matched then update set {", ".join(f"t.{q(c)} = s.{q(c)}" for c in columns)}
            when not matched then insert ({cols(columns)}) values ({cols(columns, "s")})
        """
        closed, opened = _snapshot_counts(rows)
    else:
        row = [c for c in frame.columns if c not in (VALID_FROM, VALID_TO, "_lh_close")]
        merge = revert.merge_sql(table.target, table.keys, row, versioning, version, view=q(PUBLISH_VIEW))
        closed, opened = revert.close_open_counts(frame)
    txns = _txns(table, rows, reservation, branch, (closed, opened))
    frame.createOrReplaceTempView(PUBLISH_VIEW)
    try:
        lock.check_held()
        conf = {
            ledger.USER_METADATA: ledger.commit_metadata(txns),
            MERGE_SOURCE_COPY: "none",
            SKIP_EMPTY_COMMITS: "false",
        }
        with session_conf(spark, conf):
            spark.sql(merge)
    finally:
        spark.catalog.dropTempView(PUBLISH_VIEW)
    return own_commit(spark, table.target, txns), (closed, opened)


def _take_new_columns(spark: SparkSession, table: Table, frame: DataFrame) -> None:
    """The columns the branch added (spec rule 17, a batch's new column), added to main's table."""
    have = {c.lower() for c in spark.table(table.target).columns}
    new = [f for f in frame.schema.fields if f.name.lower() not in have and f.name != "_lh_close"]
    if new:
        added = ", ".join(f"{q(f.name)} {f.dataType.simpleString()}" for f in new)
        spark.sql(f"alter table {table.target} add columns ({added})")


def _snapshot_changes(spark: SparkSession, table: Table, rows: list[Row]) -> DataFrame:
    """A snapshot's versions its captures on the branch opened or closed (their days), which the
    publish writes to main by `dbt_scd_id`."""
    days = sorted({p["batch_id"] for p in _parts(rows) if p["operation"] == "snapshot" and p["batch_id"]})
    if not days:
        return spark.table(table.branch).where(F.lit(False))
    opened = F.date_format("dbt_valid_from", "yyyy-MM-dd").isin(*days)
    closed = F.coalesce(F.date_format("dbt_valid_to", "yyyy-MM-dd").isin(*days), F.lit(False))
    return spark.table(table.branch).where(opened | closed)


def _snapshot_counts(rows: list[Row]) -> tuple[int, int]:
    return sum(int(r.versions_closed) for r in rows), sum(int(r.versions_opened) for r in rows)


def _txns(
    table: Table, rows: list[Row], reservation: syncs.Operation, branch: Branch, counts: tuple[int, int]
) -> list[ledger.Txn]:
    """`table`'s row of the publish, under the reserved transaction: the branch's transactions on
    it, counts summed (`counts`: closed and opened). Each batch keeps its id and sequence (main
    counts it applied), each capture its day; with several, the row lists them as its parts
    (transaction_parts.py) and takes its batch from the last, every author and application, and
    each message."""
    reserved = reservation.reserved
    parts = _parts(rows)
    last = parts[-1]
    ids = ", ".join(str(p["txn_id"]) for p in parts)
    said = "; ".join(p["commit_message"] for p in parts if p["commit_message"])
    plural = "s" if len(parts) > 1 else ""
    message = f"branch {branch.name}, its transaction{plural} {ids}" + (f": {said}" if said else "")
    changes = [p["schema_changes"] for p in parts]
    return [
        ledger.Txn(
            txn_id=reserved.txn_id,
            batch_id=last["batch_id"],
            sequence=last["batch_sequence"],
            source_table=last["source_table"],
            author=_each(p["author"] for p in parts),
            app_id=_each(p["app_id"] for p in parts),
            commit_message=message,
            started_at=reserved.started_at,
            rows_in=sum(int(p["rows_in"]) for p in parts),
            versions_opened=counts[1],
            versions_closed=counts[0],
            rows_overlap_deleted=sum(int(r.rows_overlap_deleted) for r in rows),
            operation=last["operation"],
            sync_id=reserved.sync.id,
            commit_json=last["commit_json"] if len(parts) == 1 else None,
            schema_changes=None if None in changes else json.dumps([c for x in changes for c in json.loads(x)]),
            parts=parts if len(parts) > 1 else None,
        )
    ]


def _parts(rows: list[Row]) -> list[dict[str, Any]]:
    """The branch's transactions in `rows` (one table's, in order), each as a part; a row that
    published parts of a branch of the branch gives those."""
    parts = []
    for r in rows:
        for p in getattr(r, PARTS, None) or [r]:
            part = {name: p[name] for name, _ in PART_FIELDS}
            if part["operation"] != "batch":
                part["batch_sequence"] = None  # a batch's sequence only: main counts it applied
            parts.append(part)
    return parts


def _each(values: Iterable[str | None]) -> str | None:
    """Every distinct value, in order, joined (None: none)."""
    return ", ".join(dict.fromkeys(v for v in values if v)) or None
