"""What `lakehistory status|log|timeline|diff|as-of|tags` print, computed in dbt's Spark session.

The macro `lakehistory.inspect` (macros/command/inspect.sql) calls `run`, through
lakehistory.door.inspect, with what the dbt project knows: its history tables and extract
snapshots (relation, key, landed source), the transactions table, and per history table the
product's own time-travel SQL, which reads its version from a one-row view (VERSION_VIEW).
Values a user types (versions, key values) travel as data (those views, DataFrame filters),
never inside the SQL text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehistory.command.render import table
from lakehistory.errors import LakehistoryError
from lakehistory.history.transactions import syncs_relation
from lakehistory.landing.extracts import captured_day, extract_days
from lakehistory.landing.manifests import read_landed
from lakehistory.landing.spec import BatchError
from lakehistory.operations.tags import tags_relation
from lakehistory.sql import q

COMMANDS = ("status", "log", "timeline", "diff", "as-of", "tags")
# The one-row view a version is read from (macros/command/inspect.sql names the same views).
VERSION_VIEW = "__lakehistory_inspect_{name}"


class InspectError(LakehistoryError, ValueError):
    """A request the project cannot answer (an unknown table, a key of the wrong length, ...)."""


def run(
    spark: SparkSession,
    command: str,
    args: dict[str, Any],
    tables: Sequence[dict[str, Any]],
    transactions: str,
    version_type: str,
    visible_sql: str = "",
    incomplete_syncs_sql: str = "",
) -> None:
    """`visible_sql`, `incomplete_syncs_sql`: the project's SQL for the last visible transaction
    (the consistent cut) and for the syncs not visible yet."""
    inspector = Inspector(spark, {t["name"]: t for t in tables}, transactions, version_type)
    inspector.visible_sql, inspector.incomplete_syncs_sql = visible_sql, incomplete_syncs_sql
    if command not in COMMANDS:
        raise InspectError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    print(getattr(inspector, command.replace("-", "_"))(**args))


class Inspector:
    def __init__(
        self, spark: SparkSession, tables: dict[str, dict[str, Any]], transactions: str, version_type: str
    ) -> None:
        self.spark = spark
        self.tables = tables
        self.transactions = transactions
        self.version_type = version_type
        self.visible_sql = self.incomplete_syncs_sql = ""  # the project's, from the macro

    # --- status -------------------------------------------------------------------------------
    def status(self) -> str:
        """Per table: applied and pending batches (or extracts), its last transaction and lag."""
        recorded = self._recorded()
        now = dt.datetime.now()  # naive local time, as PySpark returns timestamps
        rows = []
        for name, t in sorted(self.tables.items()):
            applied, last, committed = recorded.get(_plain(t["relation"]), (0, None, None))
            rows.append(
                [name, t["kind"], t["source_table"], applied, self._pending(t), last, committed, _age(now, committed)]
            )
        columns = ["table", "kind", "source", "applied", "pending", "last txn", "committed at", "lag"]
        return table(columns, rows) + self._syncs_status()

    def _syncs_status(self) -> str:
        """The consistent cut (the last transaction every table shows), and the syncs that are not
        visible yet: some of their tables have not applied them."""
        syncs = syncs_relation(self.transactions)
        if not self.visible_sql or not self.spark.catalog.tableExists(syncs.replace("`", "")):
            return ""
        visible = self.spark.sql(f"select {self.visible_sql}").collect()[0][0]
        # the syncs not complete: a few, unless runs keep failing
        incomplete = self.spark.sql(f"select * from {self.incomplete_syncs_sql} order by txn_id").collect()
        lines = f"\n\nvisible to readers of the consistent cut (version_at): transaction {visible}"
        if not incomplete:
            return lines + "; every sync is complete"
        shown = [
            [r.txn_id, r.sync_id, ", ".join(sorted(r.applied)), ", ".join(sorted(set(r.tables) - set(r.applied)))]
            for r in incomplete
        ]
        return lines + "\nsyncs not visible yet:\n" + table(["txn", "sync", "applied by", "waiting for"], shown)

    def _recorded(self) -> dict[str, tuple[int, int, dt.datetime]]:
        if not self.spark.catalog.tableExists(self.transactions.replace("`", "")):
            return {}
        found = self.spark.sql(
            f"""
            select history_table, count(*) as applied, max(txn_id) as last,
                   max_by(committed_at, txn_id) as committed
            from {self.transactions}
            where operation in ('batch', 'edit', 'snapshot')
            group by history_table
            """
        ).collect()
        return {_plain(r.history_table): (r.applied, r.last, r.committed) for r in found}

    def _pending(self, t: dict[str, Any]) -> int | str | None:
        root, source = t.get("landing_root"), t.get("source_table")
        if not root or not source:
            return None
        try:
            if t["kind"] == "snapshot":
                captured = captured_day(self.spark, self.transactions, t["relation"])
                return sum(1 for day, _ in extract_days(self.spark, root, source) if captured is None or day > captured)
            stream = (source, t["relation"])  # what this history table applied, not another's
            landed = read_landed(self.spark, self.transactions, root, [stream])[stream]
            if isinstance(landed, BatchError):
                raise landed
            return sum(1 for m in landed.manifests if m.get("batch_id") not in landed.applied.batch_ids)
        except BatchError as exc:
            return f"unreadable: {exc}"

    # --- log ----------------------------------------------------------------------------------
    def log(
        self, table_name: str | None = None, operation: str | None = None, since: str | None = None, limit: int = 20
    ) -> str:
        """The transactions, newest first, of one table (history table or landed source), one
        operation, since an instant."""
        frame = self.spark.table(self.transactions)
        if table_name:
            relation = _plain(self.tables[table_name]["relation"]) if table_name in self.tables else ""
            history_table = F.lower(F.regexp_replace("history_table", "`", ""))
            frame = frame.where((F.lower("source_table") == table_name.lower()) | (history_table == relation))
        if operation:
            frame = frame.where(F.col("operation") == operation)
        if since:
            frame = frame.where(F.col("committed_at") >= F.lit(since).cast("timestamp"))
        columns = ["txn_id", "operation", "history_table", "source_table", "batch_id", "author", "committed_at"]
        columns += ["rows_in", "versions_opened", "versions_closed"]
        rows = frame.orderBy(F.desc("txn_id")).select(*columns).take(int(limit))
        shown = [[r[0], r[1], _plain(r[2]).rsplit(".", 1)[-1], *r[3:]] for r in rows]
        headers = ["txn", "operation", "history table", "source", "batch", "author", "committed at", "rows in"]
        return table([*headers, "opened", "closed"], shown)

    # --- tags ---------------------------------------------------------------------------------
    def tags(self) -> str:
        """The tags (lakehistory.tag), oldest transaction first."""
        relation = tags_relation(self.transactions)
        if not self.spark.catalog.tableExists(relation.replace("`", "")):
            return "no tags yet (lakehistory tag NAME)"
        columns = ["tag", "txn_id", "started_at", "tagged_at", "tagged_by", "note"]
        rows = self.spark.table(relation).orderBy("txn_id", "tag").select(*columns).collect()
        if not rows:
            return "no tags (lakehistory tag NAME)"
        return table(["tag", "txn", "transaction started", "tagged at", "by", "note"], [list(r) for r in rows])

    # --- timeline -----------------------------------------------------------------------------
    def timeline(self, table_name: str, key: Sequence[str]) -> str:
        """Every version of one key: valid time (`_fivetran_start` to `_fivetran_end`) and
        transaction time (`valid_from` to `valid_to`, with the commits' times)."""
        t = self._history(table_name)
        if len(key) != len(t["key"]):
            raise InspectError(f"{table_name} has the key ({', '.join(t['key'])}): give {len(t['key'])} value(s)")
        recorded = "started_at" if self.version_type == "timestamp" else "txn_id"
        # its own rows: the other tables of a sync share the transaction
        own = self.spark.table(self.transactions).where(
            F.lower(F.regexp_replace("history_table", "`", "")) == _plain(t["relation"])
        )
        frame = self.spark.sql(
            f"""
            select h.*, f.committed_at as recorded_at, e.committed_at as superseded_at
            from {t["versioned"]} as h
            left join {{own}} as f on f.{q(recorded)} = h.valid_from
            left join {{own}} as e on e.{q(recorded)} = h.valid_to
            """,
            own=own,
        )
        types = dict(frame.dtypes)
        for column, value in zip(t["key"], key, strict=True):
            frame = frame.where(F.col(column) == F.lit(value).cast(types[column]))
        rows = frame.orderBy("valid_from", "_fivetran_start").collect()
        if not rows:
            return f"{table_name}: no version of ({', '.join(key)})"
        return table(frame.columns, [list(r) for r in rows])

    # --- diff and as-of -----------------------------------------------------------------------
    def diff(self, table_name: str, v1: str, v2: str, limit: int = 50) -> str:
        """The rows as of v2 that were not there as of v1 (+) and the other way round (-)."""
        t = self._history(table_name)
        self._versions(v1=v1, v2=v2)
        order = ", ".join(q(c) for c in [*t["key"], "_fivetran_start"])
        frame = self.spark.sql(
            f"""
            with a as (select * from {t["as_of_v1"]}), b as (select * from {t["as_of_v2"]}),
            changed as (
                select '-' as change, * from (select * from a except all select * from b)
                union all
                select '+' as change, * from (select * from b except all select * from a)
            )
            select * from changed order by {order}, change
            """
        )
        return self._shown(frame, int(limit), f"{table_name}: no row differs between versions {v1} and {v2}")

    def as_of(self, table_name: str, version: str, limit: int = 50) -> str:
        """The table's rows in its state after transaction `version`."""
        t = self._history(table_name)
        self._versions(version=version)
        order = ", ".join(q(c) for c in [*t["key"], "_fivetran_start"])
        frame = self.spark.sql(f"select * from {t['as_of']} order by {order}")
        return self._shown(frame, int(limit), f"{table_name}: no row as of version {version}")

    # --- helpers ------------------------------------------------------------------------------
    def _shown(self, frame: DataFrame, limit: int, empty: str) -> str:
        """The first `limit` rows as a table; the total is counted only when there are more."""
        rows = frame.take(limit + 1)
        if not rows:
            return empty
        note = f"\n({frame.count()} rows; the first {limit} shown)" if len(rows) > limit else ""
        return table(frame.columns, [list(r) for r in rows[:limit]]) + note

    def _table(self, name: str) -> dict[str, Any]:
        if name not in self.tables:
            known = ", ".join(sorted(self.tables))
            raise InspectError(f"{name} is not a history table or extract snapshot of this project; one of: {known}")
        return self.tables[name]

    def _history(self, name: str) -> dict[str, Any]:
        t = self._table(name)
        if t["kind"] != "history":
            history = sorted(n for n, x in self.tables.items() if x["kind"] == "history")
            raise InspectError(f"{name} is a {t['kind']}, not a history table; one of: {', '.join(history)}")
        return t

    def _versions(self, **named: str) -> None:
        """Each version as the one-row view the macro's time-travel SQL reads it from (VERSION_VIEW):
        the versions travel as data, never inside the SQL text."""
        sql_type = "timestamp" if self.version_type == "timestamp" else "bigint"
        for name, text in named.items():
            value = self._version(text)
            view = VERSION_VIEW.format(name=name)
            self.spark.createDataFrame([(value,)], f"version {sql_type}").createOrReplaceTempView(view)

    def _version(self, text: str) -> Any:
        if self.version_type == "timestamp":
            try:
                return dt.datetime.fromisoformat(str(text))
            except ValueError:
                raise InspectError(f"version {text!r} is not a timestamp (this project versions by time)") from None
        try:
            return int(text)
        except ValueError:
            raise InspectError(f"version {text!r} is not a transaction id") from None


def _plain(relation: str) -> str:
    """`schema`.`name` as schema.name, lower case: how two spellings of one relation compare."""
    return relation.replace("`", "").lower()


def _age(now: dt.datetime, then: dt.datetime | None) -> str | None:
    """`now - then` as its two largest units: 2d 3h, 5m 12s."""
    if then is None:
        return None
    seconds = max(0, int((now - then).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return " ".join(parts[:2]) or "0s"
