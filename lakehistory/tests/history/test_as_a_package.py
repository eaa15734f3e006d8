"""Another dbt project installs lakehistory as a local package and gets the history merge for its
own table by writing one model file and a source entry: the README's steps, word for word."""

from __future__ import annotations

import datetime as dt
import shutil
import textwrap
from pathlib import Path

import pytest

from harness import REPO_ROOT, DbtProject, unique_schema
from lakehistory.history import lock
from lakehistory.landing.batch import TMAX, Batch, Column
from lakehistory.landing.write import write_batch

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


EVENTS = """\
{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}

{{ lakehistory.event_history(ref('orders_history')) }}
"""


# An _hx model in a schema of its own (dbt's custom schemas): it finds its source's transactions
# by the source's table name, whatever schema either lives in.
HX_MODEL = """\
from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt, session, dbt.config.get("meta"), dbt.ref("orders_history"),
        dbt.source("lakehistory", "lakehistory_transactions"),
    )
"""

HX_YML = """\
models:
  - name: orders_hx
    config:
      schema: audit
      meta:
        lakehistory:
          hx: {table: orders, key: [order_id, shop], source: orders_history}

sources:
  - name: lakehistory
    schema: "{{ target.schema }}"
    tables:
      - name: lakehistory_transactions
"""


@pytest.fixture(scope="module")
def shop(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    """The README's project: one source entry, one history model (and an event history and an
    `_hx` table over it), with one batch applied."""
    shop = tmp_path_factory.mktemp("package") / "shop"
    (shop / "models").mkdir(parents=True)
    (shop / "dbt_project.yml").write_text(DBT_PROJECT)
    (shop / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (shop / "models" / "_shop_landing__sources.yml").write_text(SOURCES)
    (shop / "models" / "orders_history.sql").write_text(MODEL)
    (shop / "models" / "orders_events.sql").write_text(EVENTS)
    (shop / "models" / "orders_hx.py").write_text(HX_MODEL)
    (shop / "models" / "_orders_hx.yml").write_text(HX_YML)
    project = DbtProject(shop, unique_schema("package"))
    project.run_ok("deps")
    write_batch(project.landing, order_batch("b1", 1))
    project.run_ok("run")
    return project


def order_batch(batch_id: str, sequence: int) -> Batch:
    t0 = dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC)
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
    columns = [
        Column("order_id", "bigint"),
        Column("shop", "string"),
        Column("status", "string"),
        Column("total", "decimal(10,2)"),
    ]
    return Batch(
        table="orders",
        batch_id=batch_id,
        sequence=sequence,
        key=["order_id", "shop"],
        columns=columns,
        replace=[row],
        author="shop-sync",
    )


def test_another_project_gets_the_history_merge_from_one_model_and_a_source(shop: DbtProject) -> None:
    rows = shop.rows("select * from {schema}.orders_history")
    assert len(rows) == 1
    (stored,) = rows
    stored_values = (stored["order_id"], stored["shop"], stored["status"], str(stored["total"]))
    assert stored_values == (7, "north", "placed", "19.90")
    assert stored["_fivetran_active"] is True and stored["valid_from"] == 1
    (txn,) = shop.rows("select * from {schema}.lakehistory_transactions")
    recorded = (txn["batch_id"], txn["author"], txn["source_table"], txn["versions_opened"])
    assert recorded == ("b1", "shop-sync", "orders", 1)
    assert [r["_hist_event"] for r in shop.rows("select * from {schema}.orders_events")] == [1]
    (hx,) = shop.rows(f"select * from `{shop.schema}_audit`.orders_hx")
    assert (hx["order_id"], hx["status"], hx["mod_user"], hx["txn_id"], hx["orders_hx_id"]) == (
        7,
        "placed",
        "shop-sync",
        txn["txn_id"],
        1,
    )
    assert textwrap.dedent(MODEL) in (REPO_ROOT / "README.md").read_text(), "the README shows this model file"


def test_the_package_brings_no_nodes_of_its_own(shop: DbtProject) -> None:
    listed = shop.run_ok("ls").result
    expected = [
        "shop.orders_events",
        "shop.orders_history",
        "shop.orders_hx",
        "source:shop.lakehistory.lakehistory_transactions",
        "source:shop.shop_landing.orders",
    ]
    assert sorted(listed) == expected, listed


def test_commands_that_render_sql_read_no_landing_file_and_write_no_table(shop: DbtProject) -> None:
    """A pending batch that staging refuses (its manifest is not JSON) stops none of them, and
    every table keeps its Delta version; `dbt run` does read it, and names it."""

    def versions() -> dict[str, int]:
        tables = [r["tableName"] for r in shop.rows("show tables in {schema}") if not r["isTemporary"]]
        return {t: shop.rows(f"describe history {{schema}}.`{t}` limit 1")[0]["version"] for t in tables}

    # The process lets go of the writer lock its runs took: its keeper would otherwise let go,
    # a write of this process, not of a command, in the middle.
    lock.let_go_all()
    before = versions()
    refused = shop.landing / "orders" / "b2"
    refused.mkdir(parents=True)
    (refused / "manifest.json").write_text("{ not json")
    try:
        for command in (["parse"], ["ls"], ["compile"], ["docs", "generate"]):
            shop.run_ok(*command)
        assert versions() == before
        assert "b2" in shop.run_fails("run")
    finally:
        shutil.rmtree(refused)
