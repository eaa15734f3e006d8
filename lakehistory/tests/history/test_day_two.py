"""Day two: what dbt users do after the first build keeps every history whole, or is refused with
a message that says what to do. A user's project as the README writes it (history models without
`full_refresh=false`), with two sources that each land a table `orders`, and the engine alone
for what a dbt run cannot time (two runs of one table, a creation cut short)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from engine_case import OPEN, VERSIONING, Engine
from sync_case import COLUMNS as SYNC_COLUMNS
from sync_case import batch as sync_batch
from sync_case import compile_cut, new_process, visible
from sync_case import run as run_syncs
from test_as_a_package import DBT_PROJECT, MODEL

from harness import REPO_ROOT, DbtProject, unique_schema
from lakehistory import door, main_table
from lakehistory import invocation as invocations
from lakehistory.errors import HistoryError
from lakehistory.history import apply, ledger, lock, statements
from lakehistory.history.apply import apply_pending
from lakehistory.history.ledger import ensure_transactions_table
from lakehistory.history.transactions import LAYOUT, create_sql
from lakehistory.landing import run_reads
from lakehistory.landing.batch import TMAX, Batch, Column, Sync
from lakehistory.landing.extracts import ExtractError
from lakehistory.landing.spec import BatchError
from lakehistory.landing.write import write_batch
from lakehistory.names import END, START
from lakehistory.operations.abandon import abandon_sync
from lakehistory.sql import lit

SOURCES = """\
sources:
  - name: shop_landing
    meta: {lakehistory: {landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}"}}
    tables:
      - &orders
        name: orders
        meta: {lakehistory: {key: [order_id, shop]}}
        columns:
          - {name: order_id, data_type: bigint}
          - {name: shop, data_type: string}
          - {name: status, data_type: string}
          - {name: total, data_type: "decimal(10,2)"}
  - name: east_landing
    meta: {lakehistory: {landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}_east"}}
    tables:
      - *orders
  - name: lakehistory
    schema: "{{ target.schema }}"
    tables:
      - name: lakehistory_transactions
"""

HISTORY = MODEL.split("\n")[0] + "\n"

MODELS = {
    "orders_history.sql": MODEL,
    # a second history of the same landed table, for an audit copy
    "orders_copy_history.sql": MODEL,
    "orders_spare_history.sql": MODEL,
    # the other source's table of the same name, staged by an ephemeral model
    "stg_east_orders.sql": "{{ config(materialized='ephemeral') }}\n"
    "select * from {{ lakehistory.landing_batches('east_landing', 'orders') }}\n",
    "east_orders_history.sql": HISTORY + "select * from {{ ref('stg_east_orders') }}\n",
    # derived tables written without full_refresh=false
    "orders_events.sql": "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
    "{{ lakehistory.event_history(ref('orders_history')) }}\n",
    "orders_hx.py": """\
from lakehistory.hx import build_hx


def model(dbt, session):
    dbt.config(materialized="incremental")
    return build_hx(
        dbt, session, dbt.config.get("meta"), dbt.ref("orders_history"),
        dbt.source("lakehistory", "lakehistory_transactions"),
    )
""",
    "_orders_hx.yml": """\
models:
  - name: orders_hx
    config:
      meta:
        lakehistory:
          hx: {table: orders, key: [order_id, shop], source: orders_history}
""",
}

COLUMNS = [
    Column("order_id", "bigint"),
    Column("shop", "string"),
    Column("status", "string"),
    Column("total", "decimal(10,2)"),
]


def order(batch_id: str, sequence: int, status: str) -> Batch:
    """Order 7 of the north shop, as `status` from day `sequence` on."""
    start = dt.datetime(2024, 6, sequence, 12, tzinfo=dt.UTC)
    row = {"order_id": 7, "shop": "north", "status": status, "total": "19.90"}
    row |= {START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
    return Batch("orders", batch_id, sequence, ["order_id", "shop"], COLUMNS, replace=[row], author="shop-sync")


@pytest.fixture(scope="module")
def shops(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    """Two sources that each land `orders` (two landing roots), four history models and two
    derived tables, built once with one batch in each root."""
    project_dir = tmp_path_factory.mktemp("day_two") / "shops"
    (project_dir / "models").mkdir(parents=True)
    (project_dir / "dbt_project.yml").write_text(DBT_PROJECT.replace("name: shop", "name: shops"))
    (project_dir / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (project_dir / "models" / "_sources.yml").write_text(SOURCES)
    for name, text in MODELS.items():
        (project_dir / "models" / name).write_text(text)
    project = DbtProject(project_dir, unique_schema("day_two"))
    project.run_ok("deps")
    write_batch(project.landing, order("b1", 1, "placed"))
    write_batch(f"{project.landing}_east", order("b1", 1, "placed"))
    project.run_ok("run")
    return project


def active_status(project: DbtProject, model: str) -> list[str]:
    query = f"select status from {{schema}}.{model} where _fivetran_active and valid_to = {OPEN}"
    return [r["status"] for r in project.rows(query)]


def applied(project: DbtProject, model: str) -> list[str]:
    return [
        r["batch_id"]
        for r in project.rows(
            "select batch_id from {schema}.lakehistory_transactions"
            f" where replace(history_table, '`', '') = '{project.schema}.{model}' and operation = 'batch'"
            " order by txn_id"
        )
    ]


def test_the_first_staging_reads_every_landed_table_of_the_run_for_its_history_table(shops: DbtProject) -> None:
    """Each staging took its answer from the run's one read (run_reads): its history table, found
    through an ephemeral staging model too, is the one the run's table list names."""
    shops.run_ok("run")
    run = invocations._current
    assert run is not None
    landed = run.part(run_reads.Answers).landed
    answers = [found for transactions, found in landed.items() if transactions and shops.schema in transactions]
    assert answers == [{}], "every staging took its table's answer"


def test_full_refresh_of_a_history_model_or_a_table_derived_from_it_is_refused_and_keeps_it(
    shops: DbtProject,
) -> None:
    """`dbt run --full-refresh` is what a dbt user runs when a model looks wrong: it must not drop
    the history (before: the table had 0 rows after it, and its batches still counted as applied)."""
    tables = ("orders_history", "orders_events", "orders_hx")
    before = {t: shops.rows(f"select * from {{schema}}.{t}") for t in tables}
    for table in tables:
        said = shops.run_fails("run", "--full-refresh", "--select", table)
        assert "--full-refresh would" in said and "new alias" in said, said
    assert {t: shops.rows(f"select * from {{schema}}.{t}") for t in tables} == before
    shops.run_ok("run", "--select", *tables)  # and without it, the models go on as before
    assert {t: shops.rows(f"select * from {{schema}}.{t}") for t in tables} == before


def test_two_sources_with_a_table_of_the_same_name_and_two_histories_of_one_table_each_apply_every_batch(
    shops: DbtProject,
) -> None:
    """What is applied is each history table's own record: a batch applied from one landing root,
    or to one history model, is not taken as applied from another root or to another model
    (before: the second source's batch 2 was skipped without a word)."""
    write_batch(shops.landing, order("b2", 2, "shipped"))
    shops.run_ok("run", "--select", "orders_history")
    write_batch(f"{shops.landing}_east", order("b2", 2, "returned"))
    shops.run_ok("run", "--select", "east_orders_history")
    shops.run_ok("run", "--select", "orders_copy_history")
    assert active_status(shops, "orders_history") == ["shipped"]
    assert active_status(shops, "east_orders_history") == ["returned"]
    assert active_status(shops, "orders_copy_history") == ["shipped"]
    for model in ("orders_history", "east_orders_history", "orders_copy_history"):
        assert applied(shops, model) == ["b1", "b2"], model


def test_two_history_models_that_read_one_ephemeral_staging_model_are_refused(shops: DbtProject) -> None:
    """dbt compiles an ephemeral model once a run: its staged batches cannot be each history
    table's own pending ones."""
    models = shops.project_dir / "models"
    (models / "first_east_history.sql").write_text(HISTORY + "select * from {{ ref('stg_east_orders') }}\n")
    try:
        said = shops.run_fails("compile", "--select", "first_east_history")
        assert "first_east_history" in said and "east_orders_history" in said and "its own staging model" in said
    finally:
        (models / "first_east_history.sql").unlink()


def test_a_history_table_dropped_by_hand_is_not_built_again_empty(shops: DbtProject) -> None:
    """Its batches count as applied: a new empty table would hide that its history is gone."""
    shops.spark.sql(f"drop table `{shops.schema}`.orders_spare_history")
    said = shops.run_fails("run", "--select", "orders_spare_history")
    assert "does not exist, but the transactions table records" in said and "new alias" in said, said
    assert not shops.spark.catalog.tableExists(f"{shops.schema}.orders_spare_history")


def test_a_derived_table_whose_first_build_was_cut_short_is_built_again_over_its_folder(shops: DbtProject) -> None:
    """The first build of an events model (SQL) and of an `_hx` model (Python) committed its Delta
    folder and the process died before the metastore registered it: every later build was refused
    the folder, for good. The adapter registers the folder and builds the model again over it."""
    spark = shops.spark
    shops.run_ok("run", "--select", "orders_events", "orders_hx")  # up to date with the history

    def rows(model: str) -> list[str]:
        found = shops.rows(f"select * from {{schema}}.{model}")
        return sorted(json.dumps(r, default=str, sort_keys=True) for r in found)

    for model in ("orders_events", "orders_hx"):
        before = rows(model)
        folder = Path(shops.rows(f"describe detail {{schema}}.{model}")[0]["location"].removeprefix("file:"))
        kept = folder.with_name(folder.name + "_kept")
        shutil.copytree(folder, kept)
        spark.sql(f"drop table `{shops.schema}`.`{model}`")  # managed: its folder goes with it
        shutil.move(kept, folder)  # the folder as the cut-short build left it, unknown to the metastore
        shops.run_ok("run", "--select", model)
        assert rows(model) == before, model


# --- the engine alone ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("day_two_engine"), "day_two_engine")


def one_row(table: str, n: int) -> Batch:
    start = dt.datetime(2024, 1, n, tzinfo=dt.UTC)
    row = {"id": n, "name": f"n{n}", START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
    return Batch(table, f"{n:06d}", n, ["id"], [Column("id", "bigint"), Column("name", "string")], replace=[row])


def test_a_batch_two_runs_staged_at_once_is_applied_once(engine: Engine) -> None:
    """The second run staged the batch before the first applied it, then waited for the writer
    lock: under it, the record says the batch is applied, and it is skipped (before: it was
    applied again, or refused as a clash, and the table could not go on)."""
    columns = [Column("id", "bigint"), Column("name", "string")]
    engine.land("twice", [one_row("twice", 1)])
    engine.stage("twice", columns, ["id"])
    spark = engine.project.spark
    spark.table("`__lakehistory_pending__twice`").createOrReplaceTempView("__staged_by_the_second_run")
    assert engine.apply("twice", columns, ["id"])["batches"] == 1  # the first run
    outcome = apply_pending(
        spark,
        engine.writer(),
        target=engine.target("twice"),
        staged="`__staged_by_the_second_run`",
        keys=["id"],
        deleted_column=None,
        versioning=VERSIONING,
        exists=True,
    )
    assert outcome["batches"] == 0
    assert engine.ids_of("twice") == [max(engine.ids_of("twice"))], "one transaction"
    assert len(engine.physical("twice")) == 1


def test_tables_whose_creation_was_cut_short_are_completed_by_the_next_run(
    lakehouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Delta committed a table's first version and the process died before the metastore
    registered it: every later run was refused the table's folder, for good. The next run
    registers the folder (the transactions table; the writer lock, whose first commit holds its
    row; a history table) or, where no commit was whole, makes the table anew."""
    engine = Engine.start(tmp_path_factory.mktemp("cut_short"), "cut_short")
    spark, schema = engine.project.spark, engine.project.schema
    spark.sql(f"drop table {engine.transactions}")  # a new lakehouse: no table of the product yet
    location = next(r[1] for r in spark.sql(f"describe schema extended `{schema}`").collect() if r[0] == "Location")
    spark.sql(create_sql(f"delta.`{location}/lakehistory_transactions`", LAYOUT))
    spark.sql(
        f"create table delta.`{location}/lakehistory_transactions_writer` using delta as select 1 as slot,"
        " cast(null as string) as holder, cast(null as string) as token,"
        " cast(null as timestamp) as taken_at, cast(null as timestamp) as expires_at"
    )
    log = Path(location.removeprefix("file:")) / "cut" / "_delta_log"  # no commit was whole
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.0b1c.tmp").write_text('{"commitInfo"')
    ensure_transactions_table(spark, engine.transactions)
    columns = [Column("id", "bigint"), Column("name", "string")]
    # a history table's first commit (its CREATE TABLE), with no metastore entry
    engine.land("whole", [one_row("whole", 1)])
    engine.apply("whole", columns, ["id"])
    folder = Path(location.removeprefix("file:"))
    (folder / "cut_too" / "_delta_log").mkdir(parents=True)
    first = "_delta_log/00000000000000000000.json"
    shutil.copy(folder / "whole" / first, folder / "cut_too" / first)
    for table in ("cut", "cut_too"):
        engine.land(table, [one_row(table, 1)])
        assert engine.apply(table, columns, ["id"])["batches"] == 1, table
        assert [r[0]["name"] for r in engine.physical(table)] == ["n1"]
    lock.let_go_all()
    assert spark.catalog.tableExists(f"{schema}.lakehistory_transactions_writer")
    recorded = engine.project.rows(f"select source_table, batch_id from {engine.transactions} order by txn_id")
    expected = [(table, "000001") for table in ("whole", "cut", "cut_too")]
    assert [(r["source_table"], r["batch_id"]) for r in recorded] == expected

    # a main table's first commit, with no metastore entry: the next build completes it
    spark.sql(f"create table delta.`{location}/whole_main` (id bigint, name string) using delta")
    spark.sql(f"create or replace temporary view whole_rows as select id, name from {engine.target('whole')}")
    target = engine.target("whole_main")
    refreshed = main_table.refresh(spark, "cut-main", target, "whole_rows", ["id"], engine.target("whole"), [], [])
    assert refreshed == {"rows_changed": 1}
    assert [(r["id"], r["name"]) for r in engine.project.rows(f"select * from {target}")] == [(1, "n1")]


BAD_SYNCS = {
    "no_sequence": {"id": "s1", "tables": ["no_sequence"]},
    "null_tables": {"id": "s1", "sequence": 1, "tables": None},
    "null_in_tables": {"id": "s1", "sequence": 1, "tables": ["null_in_tables", None]},
    "huge_sequence": {"id": "s1", "sequence": 2**64, "tables": ["huge_sequence"]},
}


def test_a_bad_manifest_is_its_own_tables_problem_and_names_its_batch(engine: Engine) -> None:
    """The first staging of a run reads every table's manifests: a malformed `sync`, JSON nested
    deeper than Python parses, or an integer past 64 bits fails its table alone, naming the batch
    and the file (before: one such manifest failed every table of the run, naming none)."""
    spark, root = engine.project.spark, str(engine.project.landing)
    engine.land("fine", [one_row("fine", 1)])
    for table, sync in BAD_SYNCS.items():
        manifest = write_batch(engine.project.landing, one_row(table, 1)) / "manifest.json"
        manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"sync": sync}))
    deep = write_batch(engine.project.landing, one_row("deep", 1)) / "manifest.json"
    deep.write_text(deep.read_text()[:-1] + ', "commit_json": ' + "[" * 100_000 + "]" * 100_000 + "}")
    tables = ["fine", *BAD_SYNCS, "deep"]
    run = [(root, t, engine.target(t)) for t in tables]
    bad = engine.invocation("bad-1")
    found = run_reads.landed(spark, bad, engine.transactions, root, "fine", run, engine.target("fine"))
    assert found is not None and [m["batch_id"] for m in found.manifests] == ["000001"]
    for table in [*BAD_SYNCS, "deep"]:
        with pytest.raises(BatchError, match=r"Batch 000001: manifest\.json"):
            run_reads.landed(spark, bad, engine.transactions, root, table, [], engine.target(table))


def test_a_commit_whose_record_was_cut_off_by_an_error_is_recorded_before_any_other_id(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MERGE's call raised after Delta committed (an interrupt in its post-commit work, a
    Connect stream lost after the server committed): the lock is let go as not clean, so the
    next process's writer of another table records the commit before it takes an id (before:
    the lock said clean, the other table reused the id, and the first table's recovery was
    refused on every run)."""
    columns = [Column("id", "bigint"), Column("name", "string")]
    engine.land("cut_off", [one_row("cut_off", 1)])
    engine.land("after_it", [one_row("after_it", 1)])
    new_process(monkeypatch)

    def lost(*args: object) -> None:
        raise RuntimeError("the stream was lost after the server committed")

    with monkeypatch.context() as patched, pytest.raises(RuntimeError, match="stream was lost"):
        patched.setattr(apply, "own_commit", lost)
        engine.apply("cut_off", columns, ["id"])
    new_process(monkeypatch)  # the process exits (letting go of the lock), another one starts
    engine.stage("after_it", columns, ["id"])
    engine.apply_staged("after_it", columns, ["id"], history_tables=["cut_off", "after_it"])
    engine.stage("cut_off", columns, ["id"])
    assert engine.apply_staged("cut_off", columns, ["id"], history_tables=["cut_off", "after_it"])["batches"] == 0
    (committed,) = engine.ids_of("cut_off")
    assert engine.ids_of("after_it") == [committed + 1]


def test_an_operation_on_a_table_that_owes_a_reserved_sync_is_refused_and_an_undo_of_a_sync_is_whole(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync 2 of tables a and b is reserved and applied by a alone: b owes it. A revert or a
    cleanup of b would take a later id first and b could never apply the sync; an undo of the sync
    would undo a's part only. Each is refused, naming the sync; once b applied it, they go on."""
    new_process(monkeypatch)
    for name in ("owe_a", "owe_b"):
        engine.land(name, [sync_batch(name, 1, None, {1: "one"})])
        engine.apply(name, SYNC_COLUMNS, ["id"])
    sync = Sync("owe-s2", 2, ("owe_a", "owe_b"))
    for name in ("owe_a", "owe_b"):
        engine.land(name, [sync_batch(name, 2, sync, {1: "two"})])
    run_syncs(engine, ["owe_a"], "owe-1", project=["owe_a", "owe_b"])
    (first_b,) = engine.ids_of("owe_b")
    synced = max(engine.ids_of("owe_a"))
    with pytest.raises(HistoryError, match="owes the sync.*owe-s2"):
        engine.revert(["owe_b"], ["id"], to_txn=first_b)
    with pytest.raises(HistoryError, match="owes the sync.*owe-s2"):
        statements.run_transaction(
            engine.project.spark,
            engine.writer(history_tables=["owe_a", "owe_b"]),
            statements=[],
            row="select 1",
            versioned=engine.target("owe_b"),
        )
    with pytest.raises(HistoryError, match="owe_b have not applied"):
        engine.revert(["owe_a", "owe_b"], ["id"], undo_txn=synced, named=False)
    run_syncs(engine, ["owe_b"], "owe-2", project=["owe_a", "owe_b"])
    assert sorted(engine.ids_of("owe_b")) == [first_b, synced]
    assert engine.revert(["owe_a", "owe_b"], ["id"], undo_txn=synced, named=False)["transaction"] == synced + 1


def test_a_sync_given_up_lets_the_cut_move_past_it_and_a_batch_of_it_landing_later_is_refused(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync 2 of tables a and b reaches a alone: b's batch never lands. The consistent cut stays
    before it and b owes it, for good (before: nothing gave it up). `lakehistory.abandon_sync`
    records its giving up under the sync's id: the cut moves on, b owes nothing, an undo of what
    a applied is whole, and b's batch of it, landing after all, is refused naming the command."""
    new_process(monkeypatch)
    tables = ["gone_a", "gone_b"]
    for name in tables:
        engine.land(name, [sync_batch(name, 1, None, {1: "one"})])
        engine.apply(name, SYNC_COLUMNS, ["id"])
    sync = Sync("gone-s2", 2, tuple(tables))
    engine.land("gone_a", [sync_batch("gone_a", 2, sync, {1: "two"})])
    run_syncs(engine, ["gone_a"], "gone-1", project=tables)
    synced = max(engine.ids_of("gone_a"))
    visible_sql, _ = compile_cut(engine)
    assert visible(engine, visible_sql) == synced - 1
    stuck = engine.project.rows("select date_format(current_timestamp(), 'yyyy-MM-dd HH:mm:ss.SSS') as at")[0]["at"]
    with pytest.raises(HistoryError, match="owes the sync.*gone-s2.*abandon_sync"):
        engine.revert(["gone_b"], ["id"], to_txn=synced - 1)
    new_process(monkeypatch)

    engine.project.run_ok("run-operation", "lakehistory.abandon_sync", "--args", "{sync_id: gone-s2, reason: lost}")
    (given_up,) = engine.project.rows(
        f"select txn_id, history_table, commit_message from {engine.transactions} where operation = 'abandon'"
    )
    assert given_up["txn_id"] == synced
    assert given_up["history_table"].strip("`").endswith("lakehistory_transactions_syncs")
    assert given_up["commit_message"] == "gave up sync gone-s2: gone_b never applied it (lost)"
    assert visible(engine, visible_sql) == synced
    assert visible(engine, visible_sql, at=f"timestamp'{stuck}'") == synced - 1, "not given up then"
    assert engine.revert(["gone_b"], ["id"], to_txn=synced - 1)["transaction"] is None  # owes nothing now
    engine.project.run_ok("run-operation", "lakehistory.abandon_sync", "--args", "{sync_id: gone-s2}")
    assert len(engine.project.rows(f"select * from {engine.transactions} where operation = 'abandon'")) == 1
    assert "no sync 'gone-s9' is reserved" in engine.project.run_fails(
        "run-operation", "lakehistory.abandon_sync", "--args", "{sync_id: gone-s9}"
    )

    engine.land("gone_b", [sync_batch("gone_b", 2, sync, {1: "late"})])
    new_process(monkeypatch)
    late = r"batch 000002 of gone_b belongs to sync gone-s2 .*given up by .*abandon_sync"
    with pytest.raises(HistoryError, match=late):
        run_syncs(engine, ["gone_b"], "gone-2", project=tables)
    assert [r[0]["name"] for r in engine.physical("gone_b")] == ["one"]
    undone = engine.revert(tables, ["id"], undo_txn=synced, named=False)
    assert list(undone["tables"]) == ["gone_a"] and undone["left_as_they_are"] == []
    ids = [r["txn_id"] for r in engine.project.rows(f"select distinct txn_id from {engine.transactions}")]
    assert sorted(ids) == list(range(1, max(ids) + 1)), "gap-free"


def test_an_extract_of_a_sync_given_up_is_refused_before_its_snapshot_merges_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sync gx-s1 holds table gx_a's batch and gx_gauge's extract; gx_a applies it, the extract
    is late, the sync is given up, then the extract lands. Its snapshot's staging refuses it
    (before: the snapshot merged it, then its record was refused, and the snapshot held rows no
    transaction records)."""
    new_process(monkeypatch)
    sync = Sync("gx-s1", 1, ("gx_a", "gx_gauge"))
    engine.land("gx_a", [sync_batch("gx_a", 1, sync, {1: "one"})])
    run_syncs(engine, ["gx_a"], "gx-1", project=["gx_a", "gx_gauge"])
    abandon_sync(engine.project.spark, engine.writer(history_tables=["gx_a"]), "gx-s1", reason="extract lost")

    folder = engine.project.landing / "extracts" / "gx_gauge"
    folder.mkdir(parents=True)
    sidecar = {"id": "gx-s1", "sequence": 1, "tables": ["gx_a", "gx_gauge"], "author": "dump", "app_id": "x"}
    (folder / "2024-03-02.sync.json").write_text(json.dumps(sidecar))
    (folder / "2024-03-02.csv").write_text("id,name,extracted_at,extracted_by\n1,one,2024-03-02T03:00:00Z,dump\n")
    context = {
        "transactions": engine.transactions,
        "writer_lock": engine.writer_lock,
        "history_tables": [engine.target("gx_a")],
        "invocation_id": "gx-extract",
        "writer_wait_seconds": 600,
        "versioning": {"version_type": "integer", "open_end": "max", "append_only": False},
        "database_id": 0,
    }
    late = r"extract gx_gauge/2024-03-02 belongs to sync gx-s1 .*given up by .*abandon_sync"
    with pytest.raises(ExtractError, match=late):
        door.stage_extract(
            engine.project.spark,
            context,
            engine.target("gx_staged"),
            str(engine.project.landing),
            "gx_gauge",
            ["id"],
            [["id", "bigint"], ["name", "string"]],
            engine.target("gx_gauge_snapshot"),
        )


def test_a_cleanup_stopped_between_its_commit_and_its_record_is_recorded_by_the_next_writer(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup's commit carries its transaction, as a batch's does: stopped before its row was
    recorded, the next writer records it, rows purged included, before it takes an id (before:
    the commit carried nothing, the next writer took the cleanup's id, and the cleanup was never
    recorded, so no feature state said PURGE)."""
    columns = [Column("id", "bigint"), Column("name", "string")]
    twice = [one_row("purge_me", 1), dataclasses.replace(one_row("purge_me", 2), replace=[])]
    twice[1].replace = [dict(one_row("purge_me", 2).replace[0], id=1)]
    engine.land("purge_me", twice)
    engine.apply("purge_me", columns, ["id"])
    kept = len([r for r in engine.physical("purge_me") if r[2] is None])  # the current rows
    engine.land("after_purge", [one_row("after_purge", 1)])
    target = engine.target("purge_me")
    cleanup_row = f"""
        select txn_id, {engine.uuid_sql}, 'cleanup', null, {lit(target)}, null, null, 'ops', 'lakehistory.cleanup',
            'versions closed removed', started_at, current_timestamp(), 0, 0, 0, 0, 1,
            system.session.lakehistory_delta_version, null, null, null
        from (select system.session.lakehistory_txn_id as txn_id, system.session.lakehistory_started_at as started_at)
    """
    new_process(monkeypatch)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(ledger, "insert_transactions", killed)
        statements.run_transaction(
            engine.project.spark,
            engine.writer(history_tables=["purge_me"]),
            statements=[f"delete from {target} where valid_to < {OPEN}"],
            row=cleanup_row,
            versioned=target,
        )
    assert len(engine.physical("purge_me")) == kept, "the cleanup committed"
    new_process(monkeypatch)
    engine.stage("after_purge", columns, ["id"])
    engine.apply_staged("after_purge", columns, ["id"], history_tables=["purge_me", "after_purge"])
    (cleanup,) = engine.project.rows(
        f"select txn_id, rows_purged, author from {engine.transactions} where operation = 'cleanup'"
        f" and history_table = {lit(target)}"
    )
    assert (cleanup["rows_purged"], cleanup["author"]) == (1, "ops")
    assert engine.ids_of("after_purge") == [cleanup["txn_id"] + 1]
