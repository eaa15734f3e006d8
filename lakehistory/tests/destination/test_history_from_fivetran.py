"""From the destination tester's input files to the history tables: a Fivetran client sends each
file's requests to the destination, `dbt run` applies what it landed, and every table's history
equals the reference model's on the batches the requests mean (fivetran_case.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from fivetran_case import EVERY_REQUEST_ANSWERED, INPUTS, altered_at, answers, assert_histories

from harness import DbtProject
from lakehistory.destination.project import write_models
from lakehistory.destination.store import Store
from lakehistory.names import ACTIVE, END, START, SYNCED
from lakehistory_tools.fivetran_tester import FivetranConnection


def test_every_input_file_becomes_the_history_the_reference_model_gives(
    tester: FivetranConnection, landing: Path, dbt_project: DbtProject
) -> None:
    started = dt.datetime.now(dt.UTC)
    for path in sorted(INPUTS.glob("*.json")):
        tester.run_file(path)
    assert answers(tester) == EVERY_REQUEST_ANSWERED
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

    store = Store(str(landing))
    altered = [at for t in tester.tables for at in altered_at(store, "tester", t)]
    assert altered and all(started <= at <= dt.datetime.now(dt.UTC) for at in altered)
    write_models(store, "tester", "tester", dbt_project.project_dir / "models" / "fivetran")
    dbt_project.run_ok("run", "--select", "path:models/fivetran")
    assert_histories(dbt_project, tester, store, "tester")
