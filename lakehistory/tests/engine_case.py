"""The history merge called as the strategy macro calls it (staging, then the engine) on a Spark
session and real Delta tables, with no dbt invocation: for tests that apply many streams
(tests/history/test_catch_up.py, test_stops.py), and reverts as their run-operations call them.
The session is dbt's profile's (`DbtProject.spark` starts it through dbt when none runs yet)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from history_case import normalize

from harness import DbtProject, copy_project, unique_schema
from lakehistory import invocation as invocations
from lakehistory.history.apply import apply_pending
from lakehistory.history.ledger import ensure_transactions_table
from lakehistory.history.table import Versioning
from lakehistory.history.uuids import transaction_uuid_sql
from lakehistory.history.writer import Writer
from lakehistory.invocation import Invocation
from lakehistory.landing.batch import Batch, Column
from lakehistory.landing.staging import register_pending_batches
from lakehistory.landing.write import write_batch
from lakehistory.operations import revert
from oracle.streams import deleted_column_of
from oracle.transaction_time import ordered

OPEN = 9223372036854775807
VERSIONING = Versioning(version_type="integer", open_end="max", append_only=False)


@dataclasses.dataclass
class Engine:
    project: DbtProject
    uuid_sql: str
    unnamed: Invocation = dataclasses.field(default_factory=lambda: Invocation(""))

    @classmethod
    def start(cls, folder: Path, label: str) -> Engine:
        """A schema with the project's transactions table, on dbt's Spark session."""
        project = DbtProject(copy_project(folder), unique_schema(label))
        project.spark.sql(f"create schema if not exists `{project.schema}`")
        engine = cls(project, transaction_uuid_sql(database_id=0))
        ensure_transactions_table(project.spark, engine.transactions)
        return engine

    @property
    def transactions(self) -> str:
        return f"`{self.project.schema}`.`lakehistory_transactions`"

    def land(self, table: str, batches: Sequence[Batch], options: Sequence[dict] = ()) -> None:
        """Write the batches for `table`; `options[i]`: write_batch's keyword arguments for batch i."""
        for i, b in enumerate(batches):
            write_batch(self.project.landing, dataclasses.replace(b, table=table), **(options[i] if options else {}))

    def apply(self, table: str, columns: Sequence[Column], key: Sequence[str], per_commit: int | None = None) -> dict:
        """Stage the table's landed batches and apply them, as one dbt run of its model would."""
        self.stage(table, columns, key)
        return self.apply_staged(table, columns, key, per_commit)

    def stage(
        self,
        table: str,
        columns: Sequence[Column],
        key: Sequence[str],
        invocation_id: str = "",
        run_tables: Sequence[str] = (),
        project: Sequence[str] = (),
    ) -> None:
        """Stage the table's landed batches, as its model's staging does; `run_tables`: the
        landed tables of the invocation `invocation_id`, when this is its first staging, and
        `project` those the project has history models of."""
        register_pending_batches(
            self.project.spark,
            f"__lakehistory_pending__{table}",
            str(self.project.landing),
            table,
            key,
            [(c.name, c.type) for c in columns],
            self.transactions,
            self.invocation(invocation_id),
            [(str(self.project.landing), t, self.target(t)) for t in run_tables],
            history=self.target(table),
            project_tables=[(str(self.project.landing), t, "batches") for t in project],
        )

    def apply_staged(
        self,
        table: str,
        columns: Sequence[Column],
        key: Sequence[str],
        per_commit: int | None = None,
        invocation_id: str = "",
        history_tables: Sequence[str] = (),
    ) -> dict:
        """Apply what `stage` staged for the table, as the strategy macro does."""
        spark = self.project.spark
        return apply_pending(
            spark,
            self.writer(invocation_id, history_tables),
            target=self.target(table),
            staged=f"`__lakehistory_pending__{table}`",
            keys=key,
            deleted_column=deleted_column_of(columns),
            versioning=VERSIONING,
            exists=spark.catalog.tableExists(f"{self.project.schema}.{table}"),
            max_batches_per_commit=per_commit,
        )

    def revert(
        self,
        tables: Sequence[str],
        key: Sequence[str],
        to_txn: int | None = None,
        undo_txn: int | None = None,
        named: bool = True,
        invocation_id: str = "",
    ) -> dict:
        """Revert or undo the tables, as lakehistory.revert and lakehistory.undo do (`named`
        false: an undo that names no model, given every history table)."""
        return revert.revert(
            self.project.spark,
            self.writer(invocation_id, tables),
            tables=[{"model": t, "target": self.target(t), "keys": list(key)} for t in tables],
            versioning=VERSIONING,
            to_txn=to_txn,
            undo_txn=undo_txn,
            named=named,
        )

    def target(self, table: str) -> str:
        return f"`{self.project.schema}`.`{table}`"

    @property
    def writer_lock(self) -> str:
        return f"`{self.project.schema}`.`lakehistory_transactions_writer`"

    def invocation(self, invocation_id: str = "") -> Invocation:
        """The dbt invocation `invocation_id`'s state, as the door finds it; without an id, the
        engine's own, kept across its calls until `new_process`."""
        return invocations.of(invocation_id) if invocation_id else self.unnamed

    def writer(self, invocation_id: str = "", history_tables: Sequence[str] = ()) -> Writer:
        """The writer the door hands the engine, for the tables `history_tables`."""
        return Writer(
            transactions=self.transactions,
            lock=self.writer_lock,
            uuid_sql=self.uuid_sql,
            history_tables=tuple(self.target(t) for t in history_tables),
            invocation=self.invocation(invocation_id),
        )

    def new_process(self) -> None:
        """Forget what this process's calls kept, as a new process would have nothing of them."""
        self.unnamed = Invocation("")

    def physical(self, table: str) -> list[tuple[dict, int, int | None]]:
        """The table's rows with valid_from / valid_to as batch sequences (None: open)."""
        if not self.project.spark.catalog.tableExists(f"{self.project.schema}.{table}"):
            return []
        sequence = {
            r["txn_id"]: r["batch_sequence"]
            for r in self.project.rows(f"select txn_id, batch_sequence from {self.transactions}")
        }
        rows = self.project.rows(f"select * from `{self.project.schema}`.`{table}`")
        return ordered(
            [
                (
                    normalize({k: v for k, v in r.items() if k not in ("valid_from", "valid_to")}),
                    sequence[r["valid_from"]],
                    None if r["valid_to"] == OPEN else sequence[r["valid_to"]],
                )
                for r in rows
            ]
        )

    def transactions_of(self, table: str) -> list[tuple]:
        """(batch, rows in, opened, closed, overlap-deleted) per transaction, in id order."""
        return [
            (r["batch_id"], r["rows_in"], r["versions_opened"], r["versions_closed"], r["rows_overlap_deleted"])
            for r in self.project.rows(
                f"select * from {self.transactions} where source_table = '{table}' order by txn_id"
            )
        ]

    def ids_of(self, table: str) -> list[int]:
        return [
            r["txn_id"]
            for r in self.project.rows(f"select txn_id from {self.transactions} where source_table = '{table}'")
        ]


def stopping(operation: str, stop: Callable[[str], None]) -> Callable[[str, str], None]:
    """`stop` as the writer turn's `reached` (history/turn.py), for `operation`'s points only."""
    return lambda asked, point: stop(point) if asked == operation else None
