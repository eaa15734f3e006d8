"""Branches under test on the engine alone: a lakehouse of its own per case over one copy of the
project, its branches as engines on their schemas over the same landing, and the branch commands
as the door calls them (tests/history/test_branch_ownership.py, test_operation_sequences.py)."""

from __future__ import annotations

from pathlib import Path

from engine_case import OPEN, VERSIONING, Engine
from sync_case import COLUMNS, batch

from harness import DbtProject, unique_schema
from lakehistory.history.ledger import ensure_transactions_table
from lakehistory.history.uuids import transaction_uuid_sql
from lakehistory.operations import branches

TABLES = ("a", "b")


def lakehouse(folder: Path, label: str) -> Engine:
    """A lakehouse of its own (a schema and a landing) over the project copied in `folder`."""
    project = DbtProject(folder, unique_schema(label))
    project.landing = folder / "landing" / label
    project.landing_root = str(project.landing)
    project.spark.sql(f"create schema `{project.schema}`")
    engine = Engine(project, transaction_uuid_sql(database_id=0))
    ensure_transactions_table(project.spark, engine.transactions)
    return engine


def main_with_two_tables(folder: Path, label: str) -> Engine:
    """A lakehouse whose tables a and b each applied batch 1 (transactions 1 and 2)."""
    engine = lakehouse(folder, label)
    for table in TABLES:
        land(engine, table, 1, {1: f"{table}1"})
        engine.apply(table, COLUMNS, ["id"])
    return engine


def branch_with_a_change(folder: Path, label: str, name: str) -> tuple[Engine, Engine]:
    """A lakehouse with two tables (main_with_two_tables), and its branch `name`, on which table
    a applied batch 2 ({1: "a2"}), main not: (main, branch)."""
    main = main_with_two_tables(folder, label)
    create(main, name)
    branch = on_branch(main, name)
    land(main, "a", 2, {1: "a2"})
    branch.apply("a", COLUMNS, ["id"])
    return main, branch


def land(engine: Engine, table: str, sequence: int, names: dict[int, str]) -> None:
    engine.land(table, [batch(table, sequence, None, names)])


def on_branch(main: Engine, name: str) -> Engine:
    """The engine on the branch's schema, over main's landing, as a target of that schema runs."""
    project = DbtProject(main.project.project_dir, f"{main.project.schema}__{name}")
    project.landing, project.landing_root = main.project.landing, main.project.landing_root
    return Engine(project, main.uuid_sql)


def tables_of(main: Engine, name: str) -> list[dict]:
    branch = on_branch(main, name)
    return [
        {"model": t, "target": main.target(t), "branch": branch.target(t), "keys": ["id"], "kind": "history"}
        for t in TABLES
    ]


def branch_of(main: Engine, name: str) -> branches.Branch:
    return branches.Branch(name, on_branch(main, name).transactions)


def last_id(engine: Engine) -> int:
    return int(engine.project.rows(f"select max(txn_id) as n from {engine.transactions}")[0]["n"] or 0)


def create(main: Engine, name: str, fork: int | None = None) -> dict:
    at = last_id(main) if fork is None else fork
    schema = f"{main.project.schema}__{name}"
    writer = main.writer(history_tables=TABLES)
    return branches.create(main.project.spark, writer, branch_of(main, name), schema, tables_of(main, name), at, at)


def publish(main: Engine, name: str) -> dict:
    schema = f"{main.project.schema}__{name}"
    writer = main.writer(history_tables=TABLES)
    tables = tables_of(main, name)
    return branches.publish(main.project.spark, writer, branch_of(main, name), schema, tables, VERSIONING, "ana")


def drop(main: Engine, name: str) -> bool:
    schema = f"{main.project.schema}__{name}"
    return branches.drop(main.project.spark, main.writer(history_tables=TABLES), branch_of(main, name), schema)


def current(engine: Engine, table: str) -> dict[int, str]:
    """The table's current rows (the Fivetran table's active ones, as the last transaction left
    them), by key; a key twice fails."""
    rows = engine.project.rows(
        f"select id, name from {engine.target(table)} where _fivetran_active and valid_to = {OPEN}"
    )
    found = {r["id"]: r["name"] for r in rows}
    assert len(found) == len(rows), f"{table}: a key with two current rows: {rows}"
    return found
