"""From the destination tester's input files to the history tables: a Fivetran client sends each
file's requests to the destination, `dbt run` applies what it landed, and every table's history
equals the reference model's on the batches the requests mean (expected.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from conftest import INPUTS
from expected import history
from history_case import normalize

from harness import DbtProject
from lakehistory.destination.project import RENAMED, model_name, write_models
from lakehistory.names import ACTIVE, END, START, SYNCED, TRANSACTION_TIME
from lakehistory_tools.fivetran_tester import FivetranConnection

OPEN = 9223372036854775807


def altered_at(landing: Path, table: str) -> list[dt.datetime]:
    """When the destination took each AlterTable of the table: its clock, in the landed changes."""
    found = set()
    for manifest in landing.glob(f"tester/{table}/*/manifest.json"):
        found |= {
            dt.datetime.fromisoformat(c["at"]) for c in json.loads(manifest.read_text()).get("schema_changes", [])
        }
    return sorted(found)


def fivetran_rows(project: DbtProject, model: str) -> list[dict]:
    rows = project.rows(f"select * from {{schema}}.`{model}` where valid_to = {OPEN}")
    return [normalize({k: v for k, v in r.items() if k not in ("valid_from", "valid_to")}) for r in rows]


def renamed(row: dict) -> dict:
    """A source column named like a history table's own, as the model lets it in."""
    return {RENAMED.format(k) if k in TRANSACTION_TIME else k: v for k, v in row.items()}


def ordered(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def test_every_input_file_becomes_the_history_the_reference_model_gives(
    tester: FivetranConnection, landing: Path, dbt_project: DbtProject
) -> None:
    started = dt.datetime.now(dt.UTC)
    for path in sorted(INPUTS.glob("*.json")):
        tester.run_file(path)
    answers = {(s.request, s.response.WhichOneof("response")) for s in tester.sent}
    assert answers == {
        ("CreateTable", "success"),
        ("AlterTable", "success"),
        ("DescribeTable", "table"),
        ("WriteHistoryBatch", "success"),
        ("WriteBatch", "success"),
        ("Truncate", "success"),
    }
    described = {s.table: s.response.table for s in tester.sent if s.request == "DescribeTable"}
    assert [c.name for c in described["accounts"].columns] == [
        "id",
        "name",
        "tier",
        "Display Name",
        START,
        END,
        ACTIVE,
        SYNCED,
        "region",
    ], "a column AlterTable leaves out stays; the one it adds comes last"
    assert [(c.name, c.params.decimal.precision, c.params.decimal.scale) for c in described["events"].columns][-1] == (
        "weight",
        0,
        0,
    )

    altered = {t: altered_at(landing, t) for t in tester.tables}
    assert all(started <= at <= dt.datetime.now(dt.UTC) for ats in altered.values() for at in ats)
    names = write_models(landing, "tester", "tester", dbt_project.project_dir / "models" / "fivetran")
    dbt_project.run_ok("run", "--select", "path:models/fivetran")

    for table in tester.tables.values():
        model = model_name("tester", table.name)
        assert model in names
        expected = [renamed(normalize(r)) for r in history(tester.sent, table, altered[table.name])]
        actual = fivetran_rows(dbt_project, model)
        assert ordered([{k: r.get(k) for k in expected[0]} for r in actual]) == ordered(expected), table.name
