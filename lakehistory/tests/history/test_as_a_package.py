"""Another dbt project installs lakehistory as a local package and gets the history merge for its
own table by writing one model file and a source entry: the README's steps, word for word."""

from __future__ import annotations

import datetime as dt
import shutil
import textwrap
from pathlib import Path

from harness import REPO_ROOT, DbtProject, unique_schema
from lakehistory.landing.batch import TMAX, Batch, Column
from lakehistory.landing.writer import write_batch

DBT_PROJECT = """\
name: shop
version: "1.0.0"
config-version: 2
profile: lakehistory

"""

SOURCES = """\
sources:
  - name: shop_landing
    meta:
      lakehistory:
        landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}"
    tables:
      - name: orders
        meta:
          lakehistory:
            key: [order_id, shop]
        columns:
          - {name: order_id, data_type: bigint}
          - {name: shop, data_type: string}
          - {name: status, data_type: string}
          - {name: total, data_type: "decimal(10,2)"}
"""

MODEL = """\
{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key=['order_id', 'shop']) }}

select * from {{ lakehistory.landing_batches('shop_landing', 'orders') }}
"""


def test_another_project_gets_the_history_merge_from_one_model_and_a_source(lakehouse: Path, tmp_path: Path) -> None:
    shop = tmp_path / "shop"
    (shop / "models").mkdir(parents=True)
    (shop / "dbt_project.yml").write_text(DBT_PROJECT)
    (shop / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (shop / "models" / "_shop_landing__sources.yml").write_text(SOURCES)
    (shop / "models" / "orders_history.sql").write_text(MODEL)
    project = DbtProject(shop, unique_schema("package"))
    project.run_ok("deps")
    # The package brings macros and generic tests, nothing of its demo: no `+enabled: false` needed.
    listed = project.run_ok("ls").result
    assert sorted(listed) == ["shop.orders_history", "source:shop.shop_landing.orders"], listed

    # Commands that only render SQL read no landing file and write no table: a batch that staging
    # would refuse (its manifest is not JSON) stops none of them, and the schema stays empty.
    refused = project.landing / "orders" / "b0"
    refused.mkdir(parents=True)
    (refused / "manifest.json").write_text("{ not json")
    for command in (["parse"], ["ls"], ["compile"], ["docs", "generate"]):
        project.run_ok(*command)
    if project.schema in {row["namespace"] for row in project.rows("show schemas")}:
        assert not project.rows("show tables in {schema}")
    assert "b0" in project.run_fails("run"), "a run does read the landing"
    shutil.rmtree(refused)

    t0 = dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC)
    columns = [
        Column("order_id", "bigint"),
        Column("shop", "string"),
        Column("status", "string"),
        Column("total", "decimal(10,2)"),
    ]
    row = {
        "order_id": 7,
        "shop": "north",
        "status": "placed",
        "total": "19.90",
        "_fivetran_start": t0,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": t0,
    }
    write_batch(
        project.landing,
        Batch(
            table="orders",
            batch_id="b1",
            sequence=1,
            key=["order_id", "shop"],
            columns=columns,
            replace=[row],
            author="shop-sync",
        ),
    )
    project.run_ok("run", "--select", "orders_history")

    rows = project.rows("select * from {schema}.orders_history")
    assert len(rows) == 1
    (stored,) = rows
    stored_values = (stored["order_id"], stored["shop"], stored["status"], str(stored["total"]))
    assert stored_values == (7, "north", "placed", "19.90")
    assert stored["_fivetran_active"] is True and stored["valid_from"] == 1
    (txn,) = project.rows("select * from {schema}.lakehistory_transactions")
    recorded = (txn["batch_id"], txn["author"], txn["source_table"], txn["versions_opened"])
    assert recorded == ("b1", "shop-sync", "orders", 1)
    assert textwrap.dedent(MODEL) in (REPO_ROOT / "README.md").read_text(), "the README shows this model file"
