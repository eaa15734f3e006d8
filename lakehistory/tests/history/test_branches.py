"""Branches (seed 002's branching; write-audit-publish): a sync written on a branch made from a
tag, tested there, published to main as one transaction; main then equals a lakehouse that
applied the sync itself. A user's project as the README writes it: two landed tables of one
source in syncs, their history models, and `_hx`, events, states and a main table of one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from engine_case import stopping
from sync_case import new_process

from harness import REPO_ROOT, DbtProject, unique_schema
from lakehistory.command.cli import dbt_arguments
from lakehistory.history import lock, turn
from lakehistory.landing.batch import TMAX, Batch, Column, Sync
from lakehistory.landing.write import write_batch
from lakehistory.names import EARLIEST, END, START

DBT_PROJECT = 'name: shop\nversion: "1.0.0"\nconfig-version: 2\nprofile: lakehistory\n'

SOURCES = """\
sources:
  - name: shop_landing
    meta: {lakehistory: {landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}"}}
    tables:
      - name: orders
        meta: {lakehistory: {key: [order_id]}}
        columns:
          - {name: order_id, data_type: bigint}
          - {name: status, data_type: string}
      - name: customers
        meta: {lakehistory: {key: [customer_id]}}
        columns:
          - {name: customer_id, data_type: bigint}
          - {name: status, data_type: string}
  - name: lakehistory
    schema: "{{ target.schema }}"
    tables:
      - name: lakehistory_transactions
"""

HISTORY = """\
{{{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key=['{key}']) }}}}
select * from {{{{ lakehistory.landing_batches('shop_landing', '{table}') }}}}
"""

TESTS = """\
    data_tests:
      - lakehistory.one_active_row_per_key:
          arguments: {{key: [{key}], valid_from: valid_from, valid_to: valid_to}}
      - lakehistory.contiguous_intervals:
          arguments: {{key: [{key}, _fivetran_start], start: valid_from, end: valid_to, intervals: half_open}}
"""

MODELS = {
    "orders_history.sql": HISTORY.format(key="order_id", table="orders"),
    "customers_history.sql": HISTORY.format(key="customer_id", table="customers"),
    "orders_hx.py": """\
from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental", full_refresh=False)
    return build_hx(
        dbt, session, dbt.config.get("meta"), dbt.ref("orders_history"),
        dbt.source("lakehistory", "lakehistory_transactions"),
    )
""",
    "orders.sql": "{{ config(materialized='incremental', incremental_strategy='main_table',"
    " unique_key=['order_id']) }}\n"
    "select * from {{ lakehistory.hx_current(ref('orders_hx')) }}\n",
    "orders_events.sql": "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    "{{ lakehistory.event_history(ref('orders_history')) }}\n",
    "orders_states.sql": "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    "{{ lakehistory.feature_states(ref('orders_history')) }}\n",
    "_models.yml": "models:\n  - name: orders_hx\n    config:\n      meta:\n        lakehistory:\n"
    "          hx: {table: orders, key: [order_id], source: orders_history}\n"
    "  - name: orders_history\n"
    + TESTS.format(key="order_id")
    + "  - name: customers_history\n"
    + TESTS.format(key="customer_id"),
}

DAY = dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC)


def batch(table: str, number: int, sync: Sync, rows: dict[int, str], deleted: tuple[int, ...] = ()) -> Batch:
    """Batch `number` of `table` in `sync`, day `number`: `rows` (id: status) from then on, `deleted` ended."""
    key = "order_id" if table == "orders" else "customer_id"
    at = DAY + dt.timedelta(days=number)
    replace = [
        {key: i, "status": s, START: at, END: TMAX, "_fivetran_active": True, "_fivetran_synced": at, EARLIEST: True}
        for i, s in rows.items()
    ]
    delete = [{key: i, END: at} for i in deleted]
    columns = [Column(key, "bigint"), Column("status", "string")]
    return Batch(table, f"{table}-{number}", number, [key], columns, replace=replace, delete=delete, sync=sync)


def land_sync(
    project: DbtProject,
    number: int,
    orders: dict[int, str],
    customers: dict[int, str],
    orders_deleted: tuple[int, ...] = (),
    customers_deleted: tuple[int, ...] = (),
) -> None:
    sync = Sync(f"s{number}", number, ("orders", "customers"))
    write_batch(project.landing, batch("orders", number, sync, orders, orders_deleted))
    write_batch(project.landing, batch("customers", number, sync, customers, customers_deleted))


@pytest.fixture(scope="module")
def project_dir(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("branches") / "shop"
    (folder / "models").mkdir(parents=True)
    (folder / "dbt_project.yml").write_text(DBT_PROJECT)
    (folder / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (folder / "models" / "_sources.yml").write_text(SOURCES)
    for name, text in MODELS.items():
        (folder / "models" / name).write_text(text)
    DbtProject(folder, "unused").run_ok("deps")
    return folder


def lakehouse_of(project_dir: Path, label: str) -> DbtProject:
    """A lakehouse of its own (a schema) over the project and its landing, as another target would be."""
    project = DbtProject(project_dir, unique_schema(label))
    project.landing = project_dir / "landing" / label
    project.landing_root = str(project.landing)
    return project


def cli(project: DbtProject, *argv: str) -> None:
    """The `lakehistory` command, as a user types it, in `project`."""
    project.run_ok(*dbt_arguments(list(argv)))


def on_branch(main: DbtProject, name: str) -> DbtProject:
    """A target whose schema is the branch's, over the same landing."""
    branch = DbtProject(main.project_dir, f"{main.schema}__{name}")
    branch.landing, branch.landing_root = main.landing, main.landing_root
    return branch


def contents(project: DbtProject) -> dict[str, list[tuple[Any, ...]]]:
    """What a reader sees of every table, less the instants of the runs themselves (when each
    transaction started and committed, which two lakehouses cannot share)."""
    runs = {"_hist_time", "created_at", "updated_at", "rtcts", "rtuts", "xyz"}
    found = {}
    for table in ("orders_history", "customers_history", "orders_hx", "orders", "orders_events", "orders_states"):
        frame = project.spark.table(project.table(table))
        kept = [c for c in frame.columns if c not in runs]
        found[table] = sorted(tuple(str(v) for v in r) for r in frame.select(*kept).collect())
    log = project.rows(
        "select txn_id, operation, source_table, batch_id, batch_sequence, author, versions_opened, versions_closed"
        " from {schema}.lakehistory_transactions where versions_opened + versions_closed > 0"
    )
    found["transactions"] = sorted(tuple(str(v) for v in r.values()) for r in log)
    return found


def test_a_sync_written_on_a_branch_from_a_tag_tested_and_published_gives_main_what_applying_it_would(
    project_dir: Path,
) -> None:
    main = lakehouse_of(project_dir, "branch_main")
    land_sync(main, 1, {1: "placed", 2: "placed"}, {10: "new", 11: "new"})
    main.run_ok("build")
    main.run_ok("run-operation", "lakehistory.tag", "--args", "{name: day-one}")
    land_sync(main, 2, {1: "shipped", 3: "placed"}, {10: "gold"}, orders_deleted=(2,), customers_deleted=(11,))
    before = contents(main)

    cli(main, "branch", "create", "fix", "--from", "day-one")
    branch = on_branch(main, "fix")
    branch.run_ok("build")  # the sync applied, and every test of the project passed, on the branch
    assert contents(main) == before, "main's readers see nothing of the branch"
    on_branch_log = branch.rows("select distinct txn_id from {schema}.lakehistory_transactions order by txn_id")
    assert [r["txn_id"] for r in on_branch_log] == [1, 2]

    cli(main, "branch", "publish", "fix")
    assert not main.spark.catalog.databaseExists(branch.schema), "a published branch is dropped"
    main.run_ok("build")

    direct = lakehouse_of(project_dir, "branch_direct")
    direct.landing, direct.landing_root = main.landing, main.landing_root
    direct.run_ok("build")
    assert contents(main) == contents(direct)
    published = main.rows("select * from {schema}.lakehistory_transactions where txn_id = 2 order by history_table")
    assert [(r["operation"], r["batch_id"], r["sync_id"]) for r in published] == [
        ("batch", "customers-2", "lakehistory:publish_branch:2"),
        ("batch", "orders-2", "lakehistory:publish_branch:2"),
    ]
    assert all(r["commit_message"].startswith("branch fix, its transaction 2") for r in published)
    main.run_ok("run")
    assert main.rows("select max(txn_id) as n from {schema}.lakehistory_transactions")[0]["n"] == 2, (
        "main counts the published batches as applied"
    )


def test_a_publish_stopped_at_any_point_is_completed_by_asking_again(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch a sync per stop point; the publish stopped there (a new process then), asked again."""
    main = lakehouse_of(project_dir, "branch_stop")
    land_sync(main, 1, {1: "placed"}, {10: "new"})
    main.run_ok("run")
    for n, point in enumerate(turn.RESERVED_STOP_POINTS, start=2):
        land_sync(main, n, {1: f"status {n}", n: "placed"}, {10: f"tier {n}"})
        name = f"stop_{point}"
        cli(main, "branch", "create", name)
        on_branch(main, name).run_ok("run")

        def stop(reached: str, point: str = point) -> None:
            if reached == point:
                raise RuntimeError(f"stopped at {point}")

        with monkeypatch.context() as patched:
            patched.setattr(turn, "reached", stopping("publish_branch", stop))
            main.run_fails(*dbt_arguments(["branch", "publish", name]))
        lock.unrecorded.clear()  # this process's own record of the stopped commit: a new one has none
        new_process(monkeypatch)
        if point != "recorded":  # the tables the publish holds take no other transaction
            refused = main.run_fails("run")
            assert f'lakehistory.publish_branch --args \'{{"name": "{name}"}}\'' in refused, point
        cli(main, "branch", "publish", name)
        assert not main.spark.catalog.databaseExists(f"{main.schema}__{name}"), point
        main.run_ok("run")
        rows = main.rows("select txn_id, history_table, batch_id from {schema}.lakehistory_transactions")
        assert sorted((r["txn_id"], r["batch_id"]) for r in rows if r["txn_id"] == n) == [
            (n, f"customers-{n}"),
            (n, f"orders-{n}"),
        ], point
        assert max(r["txn_id"] for r in rows) == n, f"{point}: nothing applied twice"
        current = main.rows(
            f"select order_id, status from {{schema}}.orders_history where _fivetran_active and valid_to > {n}"
        )
        want = {1: f"status {n}", **{m: "placed" for m in range(2, n + 1)}}
        assert dict((r["order_id"], r["status"]) for r in current) == want, point


def test_a_branch_main_moved_under_is_refused_and_dropped_leaving_main_as_it_was(project_dir: Path) -> None:
    main = lakehouse_of(project_dir, "branch_moved")
    land_sync(main, 1, {1: "placed"}, {10: "new"})
    main.run_ok("run")
    cli(main, "branch", "create", "late")
    land_sync(main, 2, {1: "shipped"}, {10: "gold"})
    on_branch(main, "late").run_ok("run")
    main.run_ok("run")  # main applies the same sync itself meanwhile
    before = contents(main)
    refused = main.run_fails(*dbt_arguments(["branch", "publish", "late"]))
    assert "cannot be published" in refused and "Nothing was changed" in refused
    assert contents(main) == before
    assert "exists already" in main.run_fails(*dbt_arguments(["branch", "create", "late"]))
    cli(main, "branch", "drop", "late")
    assert not main.spark.catalog.databaseExists(f"{main.schema}__late")
    assert contents(main) == before


def test_a_cleanup_of_main_after_the_fork_leaves_the_branch_publishable(project_dir: Path) -> None:
    """A cleanup removes closed versions only, never the current ones a publish closes."""
    main = lakehouse_of(project_dir, "branch_cleanup")
    land_sync(main, 1, {1: "placed"}, {10: "new"})
    land_sync(main, 2, {1: "shipped"}, {10: "gold"})
    main.run_ok("run", "--select", "orders_history", "customers_history")
    cli(main, "branch", "create", "keep")
    land_sync(main, 3, {1: "delivered"}, {10: "platinum"})
    on_branch(main, "keep").run_ok("run", "--select", "orders_history", "customers_history")
    main.run_ok("run-operation", "lakehistory.cleanup", "--args", "{before_version: 2}")
    cleanups = main.rows("select txn_id from {schema}.lakehistory_transactions where operation = 'cleanup'")
    assert cleanups and min(r["txn_id"] for r in cleanups) > 2, "main's cleanup comes after the fork"

    cli(main, "branch", "list")
    cli(main, "branch", "publish", "keep")
    current = main.rows(
        "select order_id, status from {schema}.orders_history where _fivetran_active and valid_to = 9223372036854775807"
    )
    assert current == [{"order_id": 1, "status": "delivered"}]


# --- a snapshot of daily extracts on a branch ------------------------------------------------------

GAUGE_SOURCES = """\
sources:
  - name: gauge_extracts
    meta: {lakehistory: {landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}"}}
    tables:
      - name: gauge
        meta: {lakehistory: {key: [gauge_id]}}
        columns:
          - {name: gauge_id, data_type: bigint}
          - {name: label, data_type: string}
"""

GAUGE_SNAPSHOT = """\
snapshots:
  - name: gauge_snapshot
    relation: ref('stg_gauge')
    config:
      file_format: delta
      unique_key: gauge_id
      strategy: check
      check_cols: [gauge_id, label]
      updated_at: extracted_at
      hard_deletes: new_record
      meta: {lakehistory: {extract: true}}
      post_hook: "{{ lakehistory.record_capture('gauge') }}"
"""


def land_extract(project: DbtProject, day: str, rows: dict[int, str]) -> None:
    folder = project.landing / "extracts" / "gauge"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["gauge_id,label,extracted_at,extracted_by"]
    lines += [f"{i},{label},{day}T03:00:00.000Z,dump" for i, label in rows.items()]
    (folder / f"{day}.csv").write_text("\n".join(lines) + "\n")


def test_a_snapshots_captures_on_a_branch_are_published_as_main_would_capture_them(
    lakehouse: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "gauges"
    (folder / "models").mkdir(parents=True)
    (folder / "snapshots").mkdir()
    (folder / "dbt_project.yml").write_text(DBT_PROJECT.replace("shop", "gauges"))
    (folder / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (folder / "models" / "_sources.yml").write_text(GAUGE_SOURCES)
    (folder / "models" / "stg_gauge.sql").write_text(
        "{{ config(materialized='ephemeral') }}\n"
        "select * from {{ lakehistory.landing_extract('gauge_extracts', 'gauge', 'gauge_snapshot') }}\n"
    )
    (folder / "models" / "gauge_events.sql").write_text(
        "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
        "{{ lakehistory.event_history(ref('gauge_snapshot')) }}\n"
    )
    (folder / "snapshots" / "gauge_snapshot.yml").write_text(GAUGE_SNAPSHOT)
    main = lakehouse_of(folder, "branch_gauge")
    main.run_ok("deps")
    land_extract(main, "2024-06-01", {1: "one", 2: "two"})
    main.run_ok("build")
    cli(main, "branch", "create", "gauge")
    land_extract(main, "2024-06-02", {1: "uno", 3: "three"})  # 1 changed, 2 gone, 3 new
    on_branch(main, "gauge").run_ok("build")
    cli(main, "branch", "publish", "gauge")
    main.run_ok("build")  # the published capture is main's: nothing is captured twice

    direct = lakehouse_of(folder, "branch_gauge_direct")
    direct.landing, direct.landing_root = main.landing, main.landing_root
    direct.run_ok("build")
    direct.run_ok("build")  # one extract per run

    def seen(project: DbtProject) -> dict[str, list[tuple[str, ...]]]:
        snapshot = project.spark.table(project.table("gauge_snapshot"))
        events = project.spark.table(project.table("gauge_events")).drop("_hist_time")
        log = project.rows(
            "select txn_id, operation, batch_id, versions_opened, versions_closed"
            " from {schema}.lakehistory_transactions"
        )
        return {
            "snapshot": sorted(tuple(str(v) for v in r) for r in snapshot.collect()),
            "events": sorted(tuple(str(v) for v in r) for r in events.collect()),
            "transactions": sorted(tuple(str(v) for v in r.values()) for r in log),
        }

    got = seen(main)
    assert got == seen(direct)
    assert [t[:3] for t in got["transactions"]] == [("1", "snapshot", "2024-06-01"), ("2", "snapshot", "2024-06-02")]
