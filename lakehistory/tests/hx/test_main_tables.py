"""Main tables a person can correct (seed 003: the domain tables "function exactly as before",
with `mod_time`/`mod_user` set "overriding any values set by the user"; ESQL's trigger after
every insert, update and delete). A user's project as the README writes it: a main table of the
`main_table` strategy over `hx_current`, corrected with plain SQL by named people between runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
from engine_case import OPEN, stopping

from harness import REPO_ROOT, DbtProject, unique_schema
from lakehistory.history import lock, turn
from lakehistory.history.session import session_conf
from lakehistory.landing.batch import TMAX, Batch, Column, Sync
from lakehistory.landing.write import write_batch
from lakehistory.names import EARLIEST, END, START

DBT_PROJECT = 'name: shop\nversion: "1.0.0"\nconfig-version: 2\nprofile: lakehistory\n'

MODEL = """\
{{ config(materialized='incremental', incremental_strategy='fivetran_history', unique_key=['order_id', 'shop']) }}
select * from {{ lakehistory.landing_batches('shop_landing', 'orders') }}
"""

SOURCES = """\
sources:
  - name: shop_landing
    meta: {lakehistory: {landing_root: "{{ env_var('LAKEHISTORY_LANDING') }}"}}
    tables:
      - name: orders
        meta: {lakehistory: {key: [order_id, shop]}}
        columns:
          - {name: order_id, data_type: bigint}
          - {name: shop, data_type: string}
          - {name: status, data_type: string, constraints: [{type: not_null}]}
          - {name: total, data_type: "decimal(10,2)"}
  - name: lakehistory
    schema: "{{ target.schema }}"
    tables:
      - name: lakehistory_transactions
"""

MODELS = {
    "orders_history.sql": MODEL,
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
    " unique_key=['order_id', 'shop']) }}\n"
    "select * from {{ lakehistory.hx_current(ref('orders_hx')) }}\n",
    "orders_events.sql": "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    "{{ lakehistory.event_history(ref('orders_history')) }}\n",
    "orders_states.sql": "{{ config(materialized='incremental', incremental_strategy='append', full_refresh=false) }}\n"
    "{{ lakehistory.feature_states(ref('orders_history')) }}\n",
    "_models.yml": """\
models:
  - name: orders_hx
    config:
      meta:
        lakehistory:
          hx: {table: orders, key: [order_id, shop], source: orders_history}
  - name: orders
    columns:
      - name: total
        constraints: [{type: check, name: total_not_negative, expression: "total >= 0"}]
""",
}

COLUMNS = [
    Column("order_id", "bigint"),
    Column("shop", "string"),
    Column("status", "string"),
    Column("total", "decimal(10,2)"),
]


def orders(batch_id: str, sequence: int, at: dt.datetime, *rows: tuple[int, str, str]) -> Batch:
    """Orders of the north shop (id, status, total) from `at` on."""
    replace = [
        {"order_id": i, "shop": "north", "status": s, "total": t}
        | {START: at, END: TMAX, "_fivetran_active": True, "_fivetran_synced": at, EARLIEST: True}
        for i, s, t in rows
    ]
    return Batch("orders", batch_id, sequence, ["order_id", "shop"], COLUMNS, replace=replace, author="shop-sync")


@pytest.fixture(scope="module")
def shop(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project_dir = tmp_path_factory.mktemp("main_tables") / "shop"
    (project_dir / "models").mkdir(parents=True)
    (project_dir / "dbt_project.yml").write_text(DBT_PROJECT)
    (project_dir / "packages.yml").write_text(f"packages:\n  - local: {REPO_ROOT}\n")
    (project_dir / "models" / "_sources.yml").write_text(SOURCES)
    for name, text in MODELS.items():
        (project_dir / "models" / name).write_text(text)
    project = DbtProject(project_dir, unique_schema("main_tables"))
    project.run_ok("deps")
    day_one = dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC)
    write_batch(project.landing, orders("b1", 1, day_one, (7, "placed", "19.90"), (8, "placed", "5.00")))
    project.run_ok("run")
    return project


def as_person(project: DbtProject, who: str, *statements: str, message: str | None = None) -> int:
    """`statements` run by `who` (named in the commits' userMetadata, as the docs say); the main
    table's Delta version after them."""
    spark = project.spark
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps({"author": who, "message": message}))
    try:
        for statement in statements:
            spark.sql(statement.replace("{schema}", f"`{project.schema}`"))
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")
    return latest_version(project)


def latest_version(project: DbtProject) -> int:
    return int(project.rows("describe history {schema}.orders limit 1")[0]["version"])


def commit_time(project: DbtProject, version: int) -> dt.datetime:
    found = project.rows("describe history {schema}.orders")
    return next(r["timestamp"] for r in found if r["version"] == version)


def main_rows(project: DbtProject) -> dict[int, tuple[Any, ...]]:
    found = project.rows("select * from {schema}.orders")
    return {r["order_id"]: (r["status"], str(r["total"]), r["mod_user"], r["mod_time"]) for r in found}


def edits(project: DbtProject) -> list[tuple[Any, ...]]:
    return [
        (r["author"], r["batch_sequence"], r["commit_message"], r["versions_opened"], r["versions_closed"])
        for r in project.rows(
            "select * from {schema}.lakehistory_transactions where operation = 'edit' order by txn_id"
        )
    ]


def test_a_main_table_is_a_delta_table_with_its_sources_constraints_and_change_data_feed(shop: DbtProject) -> None:
    spark = shop.spark
    table = spark.table(f"`{shop.schema}`.orders")
    nullable = {f.name: f.nullable for f in table.schema.fields}
    assert nullable["order_id"] is False and nullable["shop"] is False, "the key"
    assert nullable["status"] is False, "the source's not_null constraint"
    assert nullable["total"] is True
    properties = {r["key"]: r["value"] for r in shop.rows("show tblproperties {schema}.orders")}
    assert properties["delta.enableChangeDataFeed"] == "true"
    assert properties["delta.constraints.total_not_negative"] == "total >= 0"
    for broken in (
        "update {schema}.orders set total = -1 where order_id = 7",
        "update {schema}.orders set status = null where order_id = 7",
        "insert into {schema}.orders values (9, 'north', null, 1.00, null, null)",
    ):
        with pytest.raises(Exception, match="(?i)constraint|null"):
            shop.spark.sql(broken.replace("{schema}", f"`{shop.schema}`"))
    assert sorted(main_rows(shop)) == [7, 8], "nothing of a refused edit stays"


def test_a_persons_edits_become_transactions_with_their_author_and_reach_hx_events_states_and_as_of(
    shop: DbtProject,
) -> None:
    before_edits = shop.rows("select max(txn_id) as txn from {schema}.lakehistory_transactions")[0]["txn"]
    fixed = as_person(
        shop,
        "alice",
        "update {schema}.orders set total = 25.00, mod_user = 'mallory' where order_id = 7",
        message="the total was keyed wrong",
    )
    removed = as_person(shop, "bob", "delete from {schema}.orders where order_id = 8")
    added = as_person(shop, "carol", "insert into {schema}.orders values (9, 'north', 'placed', 3.50, null, 'carol')")
    unchanged = as_person(shop, "dave", "update {schema}.orders set mod_user = 'dave' where order_id = 9")
    # a batch landed meanwhile: the run applies it first, then the edits
    write_batch(shop.landing, orders("b2", 2, dt.datetime(2024, 6, 2, 12, tzinfo=dt.UTC), (10, "placed", "8.00")))
    shop.run_ok("run")

    main = f"{shop.schema}.orders"
    assert [e[:3] for e in edits(shop)] == [
        ("alice", fixed, "the total was keyed wrong"),
        ("bob", removed, f"DELETE of {main} (Delta version {removed})"),
        ("carol", added, f"WRITE of {main} (Delta version {added})"),
        ("dave", unchanged, f"UPDATE of {main} (Delta version {unchanged})"),
    ]
    assert edits(shop)[-1][3:] == (0, 0), "an edit that changes no value opens and closes nothing"
    at = {v: commit_time(shop, v) for v in (fixed, removed, added)}
    rows = main_rows(shop)
    assert rows.keys() == {7, 9, 10}
    assert rows[7] == ("placed", "25.00", "alice", at[fixed]), "mod_user is the author's, over what was written"
    assert rows[9] == ("placed", "3.50", "carol", at[added])

    hx = shop.rows(
        "select order_id, status, cast(total as string) as total, mod_user, mod_time, deleted from {schema}.orders_hx"
        f" where txn_id > {before_edits} order by orders_hx_id"
    )
    assert [(r["order_id"], r["total"], r["mod_user"], r["mod_time"], r["deleted"]) for r in hx] == [
        (10, "8.00", "shop-sync", dt.datetime(2024, 6, 2, 12), False),
        (7, "25.00", "alice", at[fixed], False),
        (8, "5.00", "bob", at[removed], True),
        (9, "3.50", "carol", at[added], False),
    ]
    events = shop.rows(
        "select order_id, _hist_event, _hist_user from {schema}.orders_events"
        f" where _hist_trans_id > {before_edits} + 1 order by _hist_trans_id, _hist_event"
    )
    assert [(r["order_id"], r["_hist_event"], r["_hist_user"]) for r in events] == [
        (7, 3, "alice"),  # update_from
        (7, 4, "alice"),  # update_to
        (8, 2, "bob"),  # delete
        (9, 1, "carol"),  # insert
    ]
    states = shop.rows(
        "select order_id, action, author from {schema}.orders_states"
        f" where txn_id > {before_edits} + 1 order by txn_id"
    )
    assert [(r["order_id"], r["action"], r["author"]) for r in states] == [
        (7, "UPDATE", "alice"),
        (8, "DELETE", "bob"),
        (9, "CREATE", "carol"),
    ]
    # as of the transaction before the edits, order 7 has its landed total again
    then = shop.compile_inline(f"select * from {{{{ lakehistory.as_of(ref('orders_history'), {before_edits}) }}}}")
    assert {r["order_id"]: str(r["total"]) for r in shop.rows(then)} == {7: "19.90", 8: "5.00"}


def current_versions(project: DbtProject, order_id: int) -> list[tuple[str, bool]]:
    """The key's Fivetran rows (status, active) in time order."""
    rows = project.rows(
        "select status, _fivetran_active from {schema}.orders_history"
        f" where order_id = {order_id} and valid_to = {OPEN} order by _fivetran_start"
    )
    return [(r["status"], r["_fivetran_active"]) for r in rows]


def test_a_batch_and_an_edit_of_one_key_in_one_run_are_ordered_by_their_times(shop: DbtProject) -> None:
    """Two batches landed before the run, one with a version before the edit's time and one
    after: whatever the order they were landed and edited in, the later in time is current."""
    edited = as_person(shop, "gina", "update {schema}.orders set status = 'packed' where order_id = 10")
    at = commit_time(shop, edited).replace(tzinfo=dt.UTC)
    write_batch(shop.landing, orders("b3", 3, at - dt.timedelta(hours=1), (10, "paid", "8.00")))
    write_batch(shop.landing, orders("b4", 4, at + dt.timedelta(seconds=1), (10, "shipped", "8.00")))
    shop.run_ok("run")
    assert main_rows(shop)[10][:3] == ("shipped", "8.00", "shop-sync")
    assert current_versions(shop, 10) == [("placed", False), ("paid", False), ("packed", False), ("shipped", True)]
    assert edits(shop)[-1][:2] == ("gina", edited)


def test_an_edit_before_a_version_the_history_holds_goes_in_before_it(shop: DbtProject) -> None:
    """A source version that starts after the edit's time (a change the source dates ahead) stays
    current; the edit is a version of its own until it starts, and a deletion so too."""
    ahead = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=1)
    write_batch(shop.landing, orders("b5", 5, ahead, (11, "scheduled", "1.00"), (12, "scheduled", "2.00")))
    shop.run_ok("run")
    as_person(shop, "hugo", "update {schema}.orders set total = 1.50 where order_id = 11")
    as_person(shop, "hugo", "delete from {schema}.orders where order_id = 12")
    shop.run_ok("run")
    assert current_versions(shop, 11) == [("scheduled", False), ("scheduled", True)]
    totals = shop.rows(
        "select cast(total as string) as total from {schema}.orders_history"
        f" where order_id = 11 and valid_to = {OPEN} order by _fivetran_start"
    )
    assert [r["total"] for r in totals] == ["1.50", "1.00"]
    assert current_versions(shop, 12) == [("scheduled", True)], "the deletion before it takes nothing out"
    assert {11, 12} <= main_rows(shop).keys()


def test_an_edit_before_a_sync_s_version_in_one_run_leaves_that_version_current(shop: DbtProject) -> None:
    """A sync's batch takes the id its sync reserved, so a run applies it before an edit of the
    same run; when its version starts after the edit's time it stays after the edit all the same."""
    edited = as_person(shop, "lena", "update {schema}.orders set status = 'boxed' where order_id = 10")
    at = commit_time(shop, edited).replace(tzinfo=dt.UTC)
    later = dataclasses.replace(
        orders("s6", 6, at + dt.timedelta(seconds=2), (10, "delivered", "8.00")), sync=Sync("sync-6", 6, ("orders",))
    )
    write_batch(shop.landing, later)
    shop.run_ok("run")
    assert main_rows(shop)[10][:3] == ("delivered", "8.00", "shop-sync")
    assert current_versions(shop, 10)[-2:] == [("boxed", False), ("delivered", True)]


def test_an_edit_made_while_a_run_applies_is_read_by_the_next_run(shop: DbtProject) -> None:
    """The history model has read the edits, the main table is not built yet: a person's edit
    then is taken back by the build (the table shows the history) and read by the next run."""
    shop.run_ok("run", "--select", "orders_history")
    meanwhile = as_person(shop, "erin", "update {schema}.orders set status = 'held' where order_id = 7")
    shop.run_ok("run", "--select", "orders_hx", "orders")
    assert main_rows(shop)[7][0] == "placed"
    shop.run_ok("run")
    assert edits(shop)[-1][:2] == ("erin", meanwhile)
    assert main_rows(shop)[7][:3] == ("held", "25.00", "erin")


def test_full_refresh_of_a_main_table_keeps_it_and_its_edits(shop: DbtProject) -> None:
    """The table's Delta log holds the edits the next run reads: it is never dropped."""
    edited = as_person(shop, "frank", "update {schema}.orders set total = 30.00 where order_id = 9")
    shop.run_ok("run", "--full-refresh", "--select", "orders")
    assert latest_version(shop) > edited
    shop.run_ok("run")
    assert edits(shop)[-1][:2] == ("frank", edited)
    assert main_rows(shop)[9][1:3] == ("30.00", "frank")
    transactions = len(shop.rows("select * from {schema}.lakehistory_transactions"))
    shop.run_ok("run")
    assert len(shop.rows("select * from {schema}.lakehistory_transactions")) == transactions, "nothing twice"


def test_generated_edits_and_batches_give_the_reference_s_current_rows(shop: DbtProject) -> None:
    """Rounds of random edits by random people (updates, deletes, inserts, several to one key) and
    a landed batch dated before or after them, one run each; the main table against a reference
    written from the rules: a run applies its batch and edits in time order; a batch restates its
    keys from its time on; an edit puts one version (or a deletion) at its commit's time: an insert
    whole, an update with the cells it changed (of the row the main table showed) over the key's
    version at that time (whole when the key has none then)."""
    rng = random.Random(71)
    keys = list(range(100, 112))
    history: dict[int, list[tuple[dt.datetime, tuple[str, str, str] | None]]] = {}  # reference: key -> versions
    sequence = 10
    for round_ in range(3):
        in_run: list[tuple[dt.datetime, str, Any]] = []
        shown = {k: (v[0], f"{float(v[1]):.2f}") for k, v in main_rows(shop).items() if k in keys}
        for _ in range(rng.randint(2, 5)):
            key = rng.choice(keys)
            who = rng.choice(["ines", "jon", "kim"])
            if key in shown and rng.random() < 0.3:
                version = as_person(shop, who, f"delete from {{schema}}.orders where order_id = {key}")
                del shown[key]
                in_run.append((commit_time(shop, version), "edit", (key, None, None)))
            else:
                total = f"{rng.randint(1, 99)}.{rng.randint(0, 99):02d}"
                status = rng.choice(["placed", "paid", "held", "synced"])
                statement = (
                    f"update {{schema}}.orders set status = '{status}', total = {total} where order_id = {key}"
                    if key in shown
                    else f"insert into {{schema}}.orders values ({key}, 'north', '{status}', {total}, null, null)"
                )
                version = as_person(shop, who, statement)
                new = (status, f"{float(total):.2f}")
                changed = None if key not in shown else [a != b for a, b in zip(new, shown[key], strict=True)]
                shown[key] = new
                in_run.append((commit_time(shop, version), "edit", (key, (*new, who), changed)))
        # the batch is dated around the round's edits: before all, between, or after all of them
        edit_times = [t for t, _, _ in in_run]
        at = (
            rng.choice(edit_times) + dt.timedelta(milliseconds=rng.choice([-500, 1]))
            if rng.random() < 0.7
            else (max(edit_times) + dt.timedelta(seconds=5))
        )
        landed = rng.sample(keys, 3)
        sequence += 1
        rows = [(k, "synced", f"{round_ + 1}.00") for k in landed]
        write_batch(shop.landing, orders(f"g{sequence}", sequence, at.replace(tzinfo=dt.UTC), *rows))
        in_run.append((at, "batch", rows))
        shop.run_ok("run")
        for time, kind, what in sorted(in_run, key=lambda e: e[0]):
            if kind == "batch":
                for k, status, total in what:
                    kept = [v for v in history.get(k, []) if v[0] < time]
                    history[k] = [*kept, (time, (status, f"{float(total):.2f}", "shop-sync"))]
                continue
            k, values, changed = what
            before = [v for v in history.get(k, []) if v[0] < time]
            base = max(before)[1] if before else None
            if values is not None and changed is not None and base is not None:  # an update: over the version then
                values = (*(v if c else b for v, b, c in zip(values[:2], base[:2], changed, strict=True)), values[2])
            history.setdefault(k, []).append((time, values))
            history[k].sort(key=lambda v: v[0])
        expected = {k: max(v)[1] for k, v in history.items() if v and max(v)[1] is not None}
        got = {k: v[:3] for k, v in main_rows(shop).items() if k in keys}
        assert got == expected, f"round {round_}"


def test_an_edit_of_one_column_keeps_a_landed_change_the_main_table_did_not_show_yet(shop: DbtProject) -> None:
    """Batch g2 changed key 13's status; the history model runs on its own schedule, so the main
    table still showed the old status when Bob set its total. The next run keeps both changes."""
    before = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=2)
    write_batch(shop.landing, orders("c1", 30, before, (13, "placed", "3.00")))
    shop.run_ok("run")
    write_batch(shop.landing, orders("c2", 31, before + dt.timedelta(hours=1), (13, "paid", "3.00")))
    as_person(shop, "bob", "update {schema}.orders set total = 77 where order_id = 13")
    shop.run_ok("run")
    assert main_rows(shop)[13][:3] == ("paid", "77.00", "bob")
    assert current_versions(shop, 13) == [("placed", False), ("paid", False), ("paid", True)]


def test_an_edit_is_undone_as_a_batch_is(shop: DbtProject) -> None:
    """An edit transaction is taken back by `lakehistory.undo`, and the next build of the main
    table shows the values from before it."""
    before = main_rows(shop)[7]
    as_person(shop, "lena", "update {schema}.orders set status = 'lost' where order_id = 7")
    shop.run_ok("run")
    assert main_rows(shop)[7][:3] == ("lost", before[1], "lena")
    txn = shop.rows("select max(txn_id) as txn from {schema}.lakehistory_transactions where operation = 'edit'")[0]
    shop.run_ok(
        "run-operation", "lakehistory.undo", "--args", json.dumps({"model": "orders_history", "txn_id": txn["txn"]})
    )
    shop.run_ok("run")
    assert main_rows(shop)[7][:2] == before[:2]
    assert edits(shop)[-1][0] == "lena", "the undo is a transaction of its own, the edit stays on record"


class StoppedError(Exception):
    pass


def test_a_run_stopped_while_it_applies_an_edit_and_run_again_records_it_once(
    shop: DbtProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped before its history commit, or between the commit and its record, leaves
    the edit to the next run, which records it once (the commit carries its transaction)."""
    for cents, point in enumerate(("computed", "committed"), start=11):
        edited = as_person(shop, "mia", f"update {{schema}}.orders set total = 8.{cents} where order_id = 7")

        def stop(name: str, point: str = point) -> None:
            if name == point:
                raise StoppedError(name)

        monkeypatch.setattr(turn, "reached", stopping("apply", stop))
        shop.run_fails("run", "--select", "orders_history")
        monkeypatch.setattr(turn, "reached", lambda operation, point: None)
        monkeypatch.setattr(lock, "unrecorded", {})  # a new process: no memory of the stopped run
        shop.run_ok("run")
        assert [e[:2] for e in edits(shop) if e[1] == edited] == [("mia", edited)], point
        assert main_rows(shop)[7][1:3] == (f"8.{cents}", "mia"), point


def test_the_edits_of_a_main_table_made_anew_are_read_from_its_first_version(shop: DbtProject) -> None:
    """The main table dropped and built again: its Delta versions start again at 0, below the
    last edit its history table recorded of the old one; the new one's edits are read all the same."""
    key = min(main_rows(shop))
    totals = [f"update {{schema}}.orders set total = {10 + n}.00 where order_id = {key}" for n in range(6)]
    as_person(shop, "hana", *totals)
    shop.run_ok("run")
    last = edits(shop)[-1][1]
    shop.spark.sql(f"drop table `{shop.schema}`.orders")
    shop.run_ok("run", "--select", "orders")
    edited = as_person(shop, "gil", f"update {{schema}}.orders set total = 41.00 where order_id = {key}")
    assert edited <= last, "the new table's edit has a version the old table's edits passed"
    shop.run_ok("run")
    assert edits(shop)[-1][:2] == ("gil", edited)
    assert main_rows(shop)[key][1:3] == ("41.00", "gil")


def test_edits_whose_change_data_a_vacuum_removed_are_refused_naming_them_until_the_table_is_made_anew(
    shop: DbtProject,
) -> None:
    """An edit the history has not read, whose change data files a VACUUM removed: the run fails
    naming its Delta version and applies nothing; with the main table dropped, the next run builds
    it from the history and reads the new table's edits."""
    key = min(main_rows(shop))
    edited = as_person(shop, "ivo", f"update {{schema}}.orders set total = 77.00 where order_id = {key}")
    with session_conf(shop.spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
        shop.spark.sql(f"vacuum `{shop.schema}`.orders retain 0 hours")
    recorded = shop.rows("select count(*) as n from {schema}.lakehistory_transactions")[0]["n"]

    refused = shop.run_fails("run")
    assert f"edits of Delta versions {edited} to {edited} were not read yet" in refused
    assert "a VACUUM removed their change data files" in refused and "drop the main table" in refused
    assert shop.rows("select count(*) as n from {schema}.lakehistory_transactions")[0]["n"] == recorded

    shop.spark.sql(f"drop table `{shop.schema}`.orders")
    shop.run_ok("run")
    assert main_rows(shop)[key][2] != "ivo", "the edit whose change data is gone is not in the history"
    again = as_person(shop, "ivo", f"update {{schema}}.orders set total = 77.00 where order_id = {key}")
    shop.run_ok("run")
    assert edits(shop)[-1][:2] == ("ivo", again) and main_rows(shop)[key][1:3] == ("77.00", "ivo")
