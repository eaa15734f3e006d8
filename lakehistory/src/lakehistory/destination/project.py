"""What a dbt project needs to build the history of the tables a destination landed: one source
entry per Fivetran schema, with each table's key and columns in Spark's types, and one history
model per table. `lakehistory destination sources ROOT SCHEMA` prints the entry; `write_models`
writes both, for a project that takes every table as it comes.

    lakehistory destination sources LANDING_ROOT SCHEMA [--source NAME] [--models FOLDER]
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lakehistory.names import TRANSACTION_TIME
from lakehistory.sql import q as quote

from .store import Store
from .tables import STATE, TableRecord, read_record

MODEL_SQL = """\
-- {table} of Fivetran schema {schema}, with every version it had: written by `lakehistory destination sources`.
{{{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key={key}) }}}}

select {columns} from {{{{ lakehistory.landing_batches('{source}', '{table}') }}}}
"""
RENAMED = "source_{}"  # a column named like a history table's own (valid_from) gets in as source_valid_from


def records(store: Store, schema: str) -> list[TableRecord]:
    names = [n.removesuffix(".json") for n in store.files(store.path(STATE, "tables", schema)) if n.endswith(".json")]
    found = [read_record(store, schema, name) for name in names]
    return [r for r in found if r is not None]


def source_entry(store: Store, schema: str, source: str) -> dict[str, Any]:
    """The dbt source of one Fivetran schema's landed tables (docs/landing-format.md)."""
    tables = [
        {
            "name": r.name,
            "description": f"Fivetran's {'history-mode' if r.history_mode else 'live'} batches of {schema}.{r.name}.",
            "meta": {"lakehistory": {"key": r.key}},
            "columns": [{"name": c.name, "data_type": c.spark_type} for c in r.data_columns],
        }
        for r in records(store, schema)
    ]
    meta = {"lakehistory": {"landing_root": f"{store.uri}/{schema}"}}
    return {"name": source, "meta": meta, "tables": tables}


def selected(columns: list[str]) -> str:
    """The model's select list: every column, those named like a history table's own renamed."""
    clashing = [c for c in columns if c.lower() in TRANSACTION_TIME]
    if not clashing:
        return "*"
    quoted = [quote(c) for c in clashing]
    return f"* except ({', '.join(quoted)}), " + ", ".join(
        f"{q} as {quote(RENAMED.format(c))}" for q, c in zip(quoted, clashing)
    )


def model_name(source: str, table: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", f"{source}__{table}_history").lower()


def write_models(store: Store, schema: str, source: str, folder: Path) -> list[str]:
    """The source entry and a history model per table in `folder`; the models' names."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = source_entry(store, schema, source)
    (folder / f"_{source}__sources.yml").write_text(json.dumps({"version": 2, "sources": [entry]}, indent=1))
    names = []
    for table in entry["tables"]:
        name = model_name(source, table["name"])
        key = json.dumps(table["meta"]["lakehistory"]["key"])
        columns = selected([c["name"] for c in table["columns"]])
        sql = MODEL_SQL.format(table=table["name"], schema=schema, key=key, source=source, columns=columns)
        (folder / f"{name}.sql").write_text(sql)
        names.append(name)
    return names


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lakehistory destination sources", description=__doc__)
    p.add_argument("landing_root", metavar="LANDING_ROOT", help="the destination's landing root (a folder, s3a://...)")
    p.add_argument("schema", metavar="SCHEMA", help="the Fivetran schema")
    p.add_argument("--source", help="the dbt source's name (default: the schema's)")
    p.add_argument("--models", type=Path, metavar="FOLDER", help="write the entry and a model per table there")
    args = p.parse_args(argv)
    source = args.source or args.schema
    root = args.landing_root if "://" in args.landing_root else os.path.abspath(args.landing_root)
    store = Store(root)
    if args.models:
        for name in write_models(store, args.schema, source, args.models):
            print(name)
    else:
        print(json.dumps({"version": 2, "sources": [source_entry(store, args.schema, source)]}, indent=2))
    return 0
