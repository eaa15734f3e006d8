"""`_hx` models under test: what a user writes (a Python model and its YAML meta) for a history
table or a snapshot of daily extracts in a test project."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence

from harness import DbtProject

HX_YAML = "_hx_under_test.yml"


def add_hx(
    project: DbtProject,
    table: str,
    key: Sequence[str],
    source: str,
    foreign_keys: Sequence[tuple[Sequence[str], str]] = (),
) -> str:
    """Write `<table>_hx.py` and its YAML entry; foreign keys are (columns, parent table). Returns
    the model name."""
    folder = project.project_dir / "models" / "under_test"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{table}_hx"
    parents = ", ".join(f'"{p}_hx": dbt.ref("{p}_hx")' for _, p in foreign_keys)
    (folder / f"{name}.py").write_text(
        textwrap.dedent(f"""\
            from lakehistory.hx import build_hx


            def model(dbt, session):
                dbt.config(materialized="incremental", full_refresh=False)
                return build_hx(
                    dbt,
                    session,
                    dbt.config.get("meta"),
                    dbt.ref("{source}"),
                    dbt.source("lakehistory", "lakehistory_transactions"),
                    parents={{{parents}}},
                )
        """)
    )
    path = folder / HX_YAML
    doc = json.loads(path.read_text()) if path.exists() else {"version": 2, "models": []}
    hx = {"table": table, "key": list(key), "source": source}
    if foreign_keys:
        hx["foreign_keys"] = [{"columns": list(cols), "parent": f"{p}_hx"} for cols, p in foreign_keys]
    doc["models"] = [m for m in doc["models"] if m["name"] != name] + [
        {"name": name, "config": {"meta": {"lakehistory": {"hx": hx}}}}
    ]
    path.write_text(json.dumps(doc, indent=2))
    return name


def add_main(project: DbtProject, table: str) -> str:
    """The main table: a view of the `_hx` model's current rows."""
    folder = project.project_dir / "models" / "under_test"
    (folder / f"{table}_main.sql").write_text(f"select * from {{{{ lakehistory.hx_current(ref('{table}_hx')) }}}}\n")
    return f"{table}_main"


def add_derived(project: DbtProject, table: str, key: Sequence[str]) -> None:
    """Everything a user builds on a history table: its event history, feature states, `_hx`
    table and main table."""
    folder = project.project_dir / "models" / "under_test"
    folder.mkdir(parents=True, exist_ok=True)
    append = "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    (folder / f"{table}_events.sql").write_text(append + f"{{{{ lakehistory.event_history(ref('{table}')) }}}}\n")
    (folder / f"{table}_states.sql").write_text(append + f"{{{{ lakehistory.feature_states(ref('{table}')) }}}}\n")
    add_hx(project, table, key, table)
    add_main(project, table)
