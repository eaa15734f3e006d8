"""Tables Fivetran's side (lakehistory_tools.fivetran_tester) sends to `lakehistory destination`,
and what their history tables must hold after its requests: each request as the batch it means
(docs/landing-format.md "Fivetran's Partner SDK"), applied by the reference model (oracle.fivetran),
with every value as Spark returns it for the Fivetran type it was sent as.

- WriteHistoryBatch: its files' rows as they are, in history mode.
- WriteBatch: each replace or update row a version that starts at its `_fivetran_synced`, every
  such key's earliest start that time; a delete ends the key's version at its `_fivetran_synced`.
- Truncate: hard on a history-mode table as asked; on a live table always soft.
- AlterTable: each column it adds an `add_column`, each data column it leaves out a
  `drop_column`, at the instant the destination took it (read from the landing: only the
  destination's clock knows it)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from history_case import normalize

from harness import DbtProject
from lakehistory.destination.project import RENAMED, model_name
from lakehistory.destination.store import Store
from lakehistory.landing.batch import TMAX, UNMODIFIED, Batch, Column, SchemaChange, Truncate
from lakehistory.names import ACTIVE, END, START, SYNCED, TRANSACTION_TIME
from lakehistory_tools import fivetran_tester as client
from oracle.fivetran import apply_batch

SYSTEM = (START, END, ACTIVE, SYNCED)
INPUTS = Path(__file__).parent / "destination" / "inputs"  # files in the destination tester's format
OPEN = 9223372036854775807  # valid_to of a row open in transaction time
# Each kind of request an input file sends, with the answer the destination gives it when all is well.
EVERY_REQUEST_ANSWERED = {
    ("CreateTable", "success"),
    ("AlterTable", "success"),
    ("DescribeTable", "table"),
    ("WriteHistoryBatch", "success"),
    ("WriteBatch", "success"),
    ("Truncate", "success"),
}


def spark_value(value: Any, t: dict[str, Any]) -> Any:
    """A value the client sent, as the history table returns it."""
    if value is None or value is client.UNMODIFIED:
        return UNMODIFIED if value is client.UNMODIFIED else None
    kind = t["type"]
    if kind in ("SHORT", "INT", "LONG"):
        return int(value)
    if kind == "FLOAT":
        return struct.unpack("f", struct.pack("f", float(value)))[0]
    if kind == "DOUBLE":
        return float(value)
    if kind == "DECIMAL":
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-t.get("scale", 10)))
    if kind == "BOOLEAN":
        return bool(value)
    if kind == "NAIVE_DATE":
        return dt.date.fromisoformat(value)
    if kind == "NAIVE_DATETIME":
        return dt.datetime.fromisoformat(value)
    if kind == "UTC_DATETIME":
        return value if isinstance(value, dt.datetime) else client.utc(value)
    if kind == "BINARY":
        base64.b64decode(value, validate=True)  # the client sends base64, kept as its text
    return client.text(value, kind)


def typed(rows: Sequence[dict[str, Any]], types: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{c: spark_value(v, types[c]) for c, v in r.items()} for r in rows]


def batches(sent: Sequence[client.Sent], table: client.TableDef, altered_at: Sequence[dt.datetime]) -> list[Batch]:
    """The batches the destination's requests for `table` mean, in order. `altered_at`: when the
    destination took each AlterTable that changed the table, in order."""
    types: dict[str, dict[str, Any]] = {}  # every column the table was ever defined with
    for s in sent:
        if s.table == table.name and s.definition is not None:
            types = s.definition.all_columns() | types
    columns = [Column(c, "string") for c in types if c not in SYSTEM]  # names only: the model's rows are typed
    out: list[Batch] = []

    def batch(**parts: Any) -> Batch:
        n = len(out) + 1
        return Batch(table=table.name, batch_id=str(n), sequence=n, key=table.key, columns=columns, **parts)

    created: set[str] = set()
    altered: list[dt.datetime] = []
    for s in sent:
        if s.table != table.name:
            continue
        if s.request == "CreateTable" and s.definition is not None:
            created = set(s.definition.all_columns())
        elif s.request == "AlterTable" and s.definition is not None:
            asked = s.definition.all_columns()
            changes = [c for c in asked if c not in created] + [c for c in created if c not in asked]
            if changes:
                at = altered_at[len(altered)]
                altered.append(at)
                out.append(
                    batch(
                        schema_changes=[
                            SchemaChange("add_column" if c in asked else "drop_column", c, at, type="string")
                            for c in changes
                        ]
                    )
                )
                created = set(asked)
        elif s.request == "Truncate":
            mode = "soft" if s.soft or not table.history_mode else "hard"
            out.append(batch(truncate=Truncate(mode, s.synced)))
        elif s.request == "WriteHistoryBatch":
            files = {k: typed(v, types | {START: {"type": "UTC_DATETIME"}}) for k, v in s.files.items()}
            out.append(
                batch(
                    replace=files.get("replace", []),
                    update=files.get("update", []),
                    delete=files.get("delete", []),
                    earliest=files.get("earliest", []),
                )
            )
        elif s.request == "WriteBatch":
            out.append(batch(**_live(table, typed_files(s, types))))
    return out


def typed_files(s: client.Sent, types: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {kind: typed(rows, types) for kind, rows in s.files.items()}


def _live(table: client.TableDef, files: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    versions: dict[str, list[dict[str, Any]]] = {"replace": [], "update": []}
    earliest = []
    for kind in ("replace", "update"):
        for row in files.get(kind, []):
            synced = row[SYNCED]
            versions[kind].append({**row, START: synced, END: TMAX, ACTIVE: True})
            earliest.append({**{k: row[k] for k in table.key}, START: synced})
    deletes = [{**{k: r[k] for k in table.key}, END: r[SYNCED]} for r in files.get("delete", [])]
    return {**versions, "delete": deletes, "earliest": earliest}


def history(sent: Sequence[client.Sent], table: client.TableDef, altered_at: Sequence[dt.datetime]) -> list[dict]:
    """The table's rows as Fivetran's history mode has them after every request."""
    rows: list[dict] = []
    for b in batches(sent, table, altered_at):
        rows = apply_batch(rows, b)
    return rows


def answers(fivetran: client.FivetranConnection) -> set[tuple[str, str]]:
    """(request, the kind of answer) of every request sent."""
    return {(s.request, s.response.WhichOneof("response")) for s in fivetran.sent}


def altered_at(store: Store, schema: str, table: str) -> list[dt.datetime]:
    """When the destination took each AlterTable of the table: its clock, in the landed changes."""
    found = set()
    folder = store.path(schema, table)
    for batch in store.folders(folder):
        manifest = json.loads(store.read_text(f"{folder}/{batch}/manifest.json") or "{}")
        found |= {dt.datetime.fromisoformat(c["at"]) for c in manifest.get("schema_changes", [])}
    return sorted(found)


def renamed(row: dict) -> dict:
    """A source column named like a history table's own, as the model lets it in."""
    return {RENAMED.format(k) if k in TRANSACTION_TIME else k: v for k, v in row.items()}


def ordered(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def assert_histories(project: DbtProject, fivetran: client.FivetranConnection, store: Store, schema: str) -> None:
    """Every table's history table (the rows open in transaction time) is the reference model's."""
    for table in fivetran.tables.values():
        model = model_name(schema, table.name)
        expected = [renamed(normalize(r)) for r in history(fivetran.sent, table, altered_at(store, schema, table.name))]
        rows = project.rows(f"select * from {{schema}}.`{model}` where valid_to = {OPEN}")
        actual = [normalize({k: v for k, v in r.items() if k not in ("valid_from", "valid_to")}) for r in rows]
        assert ordered([{k: r.get(k) for k in expected[0]} for r in actual]) == ordered(expected), table.name
