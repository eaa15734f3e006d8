"""A history table under test: a source entry and one model file in a test project (what a user
writes), batches landed with the product's writer, dbt runs, and the table read back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from harness import DbtProject
from lakehistory.landing.batch import TMAX, Batch, Column, Row
from lakehistory.landing.write import write_batch
from lakehistory.names import ACTIVE, END, START, SYNCED

OPEN = 9223372036854775807
SOURCE = "test_landing"
SYSTEM = (START, END, ACTIVE, SYNCED)
# Every data column a random stream (oracle.streams) may draw: one declaration fits any stream.
SUPERSET = [
    Column("s_text", "string"),
    Column("n_big", "bigint"),
    Column("d_dbl", "double"),
    Column("b_flag", "boolean"),
    Column("t_ts", "timestamp"),
    Column("_fivetran_note", "string"),
    Column("deleted", "boolean"),
    Column("_fivetran_deleted", "boolean"),
]
# The same without the deleted columns: for models that give `deleted` a meaning of their own (`_hx`).
SUPERSET_DATA = [c for c in SUPERSET if c.name not in ("deleted", "_fivetran_deleted")]


@dataclasses.dataclass
class HistoryCase:
    project: DbtProject
    name: str
    columns: Sequence[Column]
    key: Sequence[str]
    deleted_column: str | None = None
    not_null: Sequence[str] = ()  # columns with a `not_null` constraint in the source's YAML

    def __post_init__(self) -> None:
        models = self.project.project_dir / "models" / "under_test"
        models.mkdir(parents=True, exist_ok=True)
        deleted = f", deleted_column='{self.deleted_column}'" if self.deleted_column else ""
        (models / f"{self.name}.sql").write_text(
            textwrap.dedent(f"""\
                {{{{ config(materialized='incremental', incremental_strategy='fivetran_history',
                          unique_key={list(self.key)!r}{deleted}) }}}}
                select * from {{{{ lakehistory.landing_batches('{SOURCE}', '{self.name}') }}}}
            """)
        )
        tables = _registered(self.project)
        tables[self.name] = {
            "name": self.name,
            "meta": {"lakehistory": {"key": list(self.key)}},
            "columns": [
                {"name": c.name, "data_type": c.type, "constraints": self._constraints(c)} for c in self.columns
            ],
        }
        source = {
            "version": 2,
            "sources": [
                {
                    "name": SOURCE,
                    "meta": {"lakehistory": {"landing_root": "{{ env_var('LAKEHISTORY_LANDING') }}"}},
                    "tables": list(tables.values()),
                }
            ],
        }
        (models / "_test_landing__sources.yml").write_text(json.dumps(source, indent=2))

    def _constraints(self, column: Column) -> list[dict]:
        return [{"type": "not_null"}] if column.name in self.not_null else []

    def land(self, batch: Batch, **writer_options: Any) -> None:
        write_batch(self.project.landing, dataclasses.replace(batch, table=self.name), **writer_options)

    def run(self) -> None:
        self.project.run_ok("run", "--select", self.name)

    def run_fails(self) -> str:
        return self.project.run_fails("run", "--select", self.name)

    # --- reading back ---------------------------------------------------------------------
    def physical_rows(self) -> list[dict]:
        if not self.exists():
            return []
        return sorted((normalize(r) for r in self.project.rows(f"select * from {{schema}}.`{self.name}`")), key=_order)

    def fivetran_rows(self) -> list[dict]:
        """The Fivetran history-mode table: the rows open in transaction time."""
        return sorted(
            (
                {k: v for k, v in r.items() if k not in ("valid_from", "valid_to")}
                for r in self.physical_rows()
                if r["valid_to"] == OPEN
            ),
            key=_order,
        )

    def exists(self) -> bool:
        spark = self.project.spark
        return spark.catalog.databaseExists(self.project.schema) and spark.catalog.tableExists(
            f"{self.project.schema}.{self.name}"
        )

    def transactions(self) -> list[dict]:
        if not self.project.spark.catalog.tableExists(f"{self.project.schema}.lakehistory_transactions"):
            return []
        return self.project.rows(
            f"select * from {{schema}}.lakehistory_transactions where source_table = '{self.name}' order by txn_id"
        )

    def expected(self, rows: Sequence[Row], columns: Sequence[Column] | None = None) -> list[dict]:
        """Reference rows in the shape the table returns: every column (the declared ones unless
        `columns` says otherwise), timestamps naive UTC."""
        names = [c.name for c in (columns or self.columns)] + list(SYSTEM)
        return sorted((normalize({n: r.get(n) for n in names}) for r in rows), key=_order)


def _registered(project: DbtProject) -> dict:
    path = project.project_dir / "models" / "under_test" / "_test_landing__sources.yml"
    if not path.exists():
        return {}
    return {t["name"]: t for t in json.loads(path.read_text())["sources"][0]["tables"]}


def normalize(row: dict) -> dict:
    """Timestamps as naive UTC (PySpark returns them in the process's zone, UTC in the tests)."""
    out = {}
    for name, value in row.items():
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        out[name] = value
    return out


def _order(row: dict) -> str:
    return json.dumps(row, default=str, sort_keys=True)


def pad(batch: Batch, columns: Sequence[Column]) -> Batch:
    """The batch over a superset of its columns: cells it lacks are NULL (for the reference
    model and for the written files alike)."""
    names = [c.name for c in columns]

    def fill(rows: list[Row]) -> list[Row]:
        return [{**{n: None for n in names}, **r} for r in rows]

    return dataclasses.replace(batch, columns=list(columns), replace=fill(batch.replace), update=fill(batch.update))


# --- hand-written batches ------------------------------------------------------------------

BASE = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def T(hours: float) -> dt.datetime:  # noqa: N802
    return BASE + dt.timedelta(hours=hours)


def naive(t: dt.datetime) -> dt.datetime:
    return t.astimezone(dt.UTC).replace(tzinfo=None)


def version(start: dt.datetime, end: dt.datetime = TMAX, **values) -> dict:
    return {**values, START: start, END: end, ACTIVE: end == TMAX, SYNCED: start}


def batch(table: str, columns, key: str, n: int, author: str, versions=(), deletes=(), earliest=None) -> Batch:
    """A history-mode batch; the earliest set is each key's first version in the batch."""
    if earliest is None:
        firsts: dict = {}
        for v in versions:
            firsts[v[key]] = min(firsts.get(v[key], v[START]), v[START])
        earliest = [{key: k, START: s} for k, s in firsts.items()]
    return Batch(
        table=table,
        batch_id=f"{n:06d}",
        sequence=n,
        key=[key],
        columns=columns,
        replace=list(versions),
        delete=[{key: k, END: e} for k, e in deletes],
        earliest=earliest,
        author=author,
    )
