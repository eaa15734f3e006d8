"""The same project, unchanged, on a Spark standalone cluster through a Spark Connect server
(profile target `connect`): a master and two workers on 127.0.0.1, the server's executors in the
workers' processes, and the tables it builds equal to those the embedded engine builds from the
same landing.

Runs in its own pytest process (`make test-cluster`): a Connect client and the embedded
session of the other tests do not belong in one process.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import build_tables
import pytest
from build_tables import comparable, stored_relations
from object_store import WAREHOUSE, StoreLanding
from standalone import Cluster

from harness import DEMO_CONFIG, DEMO_EXTRACTS, PROFILES_DIR, DbtProject, copy_project, unique_schema
from lakehistory_tools.generator import GeneratorConfig, generate
from lakehistory_tools.object_store import Store

pytestmark = pytest.mark.connect

# Two days of the CRMP demo: batches merged, extracts snapshotted, _hx, events and states built;
# the `demo` fixture's (conftest.py), whose build `make test-python` saves for this test.
DEMO, EXTRACTS = DEMO_CONFIG, list(DEMO_EXTRACTS)
REFERENCE_SCRIPT = Path(__file__).with_name("embedded_reference.py")
# Both builds run the profiles' four threads: every batch and extract of the demo belongs to its
# day's sync, whose id is reserved in sync order before any of its tables applies it, so the ids
# (and the versions made of them) do not depend on which thread reaches the writer lock first.
# Over Connect the history models of a run take turns in dbt's one session (session.py).


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], dict[str, Counter]]]:
    """The reference for the cluster's build: the demo built by the embedded engine. The `demo`
    fixture's build, saved by `make test-python`, when it was made of the same sources; else built
    here (embedded_reference.py) in a process and a lakehouse of its own, while the cluster builds
    (the cluster's processes leave part of the two cores idle). The fixture's value waits for it
    and returns its tables' rows."""
    saved = build_tables.load(build_tables.saved_demo(), build_tables.fingerprint(DEMO, tuple(EXTRACTS)))
    if saved is not None:
        yield lambda: saved
        return
    work = tmp_path_factory.mktemp("embedded")
    project = DbtProject(copy_project(work / "project"), unique_schema("embedded"))
    _, env = project.process()
    env |= {"LAKEHISTORY_LAKEHOUSE": str(work / "lakehouse"), "LAKEHISTORY_DRIVER_MEMORY": "2g"}
    env.pop("SPARK_REMOTE", None)  # PySpark would make its session a Connect client of the server
    out, log = work / "tables.pickle", work / "build.log"
    args = [str(project.project_dir), str(PROFILES_DIR), str(DEMO.scale), str(DEMO.syncs), str(DEMO.seed)]
    with (
        log.open("w") as said,
        subprocess.Popen(  # noqa: S603 - this venv's Python on this test's project
            [sys.executable, str(REFERENCE_SCRIPT), *args, ",".join(EXTRACTS), str(out)],
            stdout=said,
            stderr=said,
            env=env,
        ) as build,
    ):

        def tables() -> dict[str, Counter]:
            assert build.wait() == 0, log.read_text()[-8000:]
            return pickle.loads(out.read_bytes())  # noqa: S301 - this test's own file

        yield tables
        build.kill()  # a test that failed before it waited


HISTORY = ("meta_network_history", "meta_station_history", "obs_raw_history")


def as_of(spark, schema: str, version: int, table_name: str = "meta_station_history") -> list[tuple]:
    """A history table as of a transaction: its Fivetran rows valid then."""
    table = spark.table(f"`{schema}`.`{table_name}`")
    valid = table.where((table.valid_from <= version) & (table.valid_to > version))
    return sorted((tuple(row.asDict().items()) for row in valid.drop("valid_from", "valid_to").collect()), key=repr)


@dataclass
class Reads:
    """What an analyst's client saw while day two was built through the same server."""

    before: list[tuple]  # meta_station_history as of day one's last transaction, before the build
    as_of_day_one: list[list[tuple]] = field(default_factory=list)  # the same, read during the build
    latest: list[tuple[int, list[tuple]]] = field(default_factory=list)  # (version, rows) as of the newest
    ids: list[list[int]] = field(default_factory=list)  # the transaction ids, read during the build
    # (the consistent cut, every history table's rows as of it), read during the build
    cuts: list[tuple[int, dict[str, list[tuple]]]] = field(default_factory=list)


@pytest.fixture(scope="module")
def cluster_build(
    embedded: Callable, connect_url: str, tmp_path_factory: pytest.TempPathFactory, store_landing: StoreLanding
) -> tuple[DbtProject, Reads]:
    """The demo built through the server, day one by dbt in this process, day two by a `dbt build`
    process while this process reads the history through a Connect session of its own. The data
    tests run on day two, through the server, over the tables of both days."""
    from pyspark.sql import SparkSession

    project = store_landing.project(tmp_path_factory.mktemp("cluster-build"), "connect")
    generate(project.landing, DEMO, extract_tables=EXTRACTS, only_sync=1)
    store_landing.copy(project)
    project.run_ok("build", "--exclude-resource-type", "test")
    spark = SparkSession.builder.remote(connect_url).getOrCreate()

    def ids() -> list[int]:
        """The transaction ids recorded, each once (a sync has a row per table)."""
        return sorted({r.txn_id for r in spark.table(f"`{project.schema}`.lakehistory_transactions").collect()})

    cut_sql = "select " + project.compile_inline("{{ lakehistory.version_at_sql() }}").strip()

    day_one = max(ids())
    reads = Reads(before=as_of(spark, project.schema, day_one))
    generate(project.landing, DEMO, extract_tables=EXTRACTS, only_sync=2)
    store_landing.copy(project)
    log = project.project_dir / "day-two.log"
    command, env = project.process("build")
    with log.open("w") as out, subprocess.Popen(command, stdout=out, stderr=out, env=env) as build:  # noqa: S603
        while build.poll() is None:
            reads.ids.append(sorted(ids()))
            reads.as_of_day_one.append(as_of(spark, project.schema, day_one))
            reads.latest.append((reads.ids[-1][-1], as_of(spark, project.schema, reads.ids[-1][-1])))
            cut = int(spark.sql(cut_sql).collect()[0][0])
            reads.cuts.append((cut, {t: as_of(spark, project.schema, cut, t) for t in HISTORY}))
            time.sleep(8)  # an analyst's pace (a read is three queries on the two executors the build uses)
    assert build.returncode == 0, log.read_text()[-5000:]
    return project, reads


def test_the_demo_builds_on_a_cluster_as_it_does_embedded(
    cluster_build: tuple[DbtProject, Reads], connect_url: str, embedded: Callable, cluster: Cluster, object_store: Store
) -> None:
    project, _ = cluster_build
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(connect_url).getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), "assertions must read through Connect too"
    # The work ran in the workers' executors, not in the server's process.
    assert all(tasks > 0 for tasks in cluster.finished_tasks()), cluster.finished_tasks()
    # Every table is on the store, its files and its Delta log; the landing was read from there.
    schema_uri = f"{WAREHOUSE}/{project.schema}.db"
    views = {r["viewName"] for r in project.rows("show views in {schema}")}
    tables = set(stored_relations(spark, project.schema)) - views
    for table in tables:
        location = project.rows(f"describe detail {{schema}}.`{table}`")[0]["location"]
        assert location == f"{schema_uri}/{table}", (table, location)
    logs = {key.split("/")[2] for key in object_store.keys(schema_uri) if "/_delta_log/" in key}
    assert logs == tables, logs
    assert project.landing_root.startswith("s3a://") and object_store.keys(project.landing_root)

    # Every table and view of the build equals the embedded engine's: history rows with their
    # validity, transactions, _hx ids and history foreign keys, events, states, snapshots, seeds.
    reference = embedded()
    assert stored_relations(spark, project.schema) == sorted(reference)
    for table in ("lakehistory_transactions", "meta_station_history", "obs_raw_hx", "meta_station_states"):
        assert table in reference, table
    differ = {}
    for table, want in reference.items():
        got = comparable(spark, project.schema, table)
        if not want or got != want:
            differ[table] = (len(want), list((got - want).items())[:3], list((want - got).items())[:3])
    assert not differ, f"tables empty or not as the embedded build made them: {differ}"

    seed = {r["vars_id"]: r for r in project.rows("select * from {schema}.platform_variables_seed")}
    assert seed[2]["precision"] is None and seed[3]["display_name"] == "Wind direction (O'Brien vane)"
    detail = project.rows("describe detail {schema}.platform_variable_catalog")[0]
    assert detail["format"] == "delta"

    # The _hx models ran their whole path over Connect: the main tables are the current states.
    active = project.rows("select count(*) as n from {schema}.meta_station_history_mode where _fivetran_active")[0]["n"]
    assert project.rows("select count(*) as n from {schema}.meta_station")[0]["n"] == active > 0
    current_vars = project.rows(
        "select count(*) as n from {schema}.meta_vars_snapshot where dbt_valid_to is null and dbt_is_deleted = 'False'"
    )
    assert project.rows("select count(*) as n from {schema}.meta_vars")[0]["n"] == current_vars[0]["n"] > 0
    unresolved = project.rows(
        "select count(*) as n from {schema}.obs_raw_hx where meta_vars_hx_id is null or meta_history_hx_id is null"
    )
    assert unresolved[0]["n"] == 0

    # Events and feature states too: each station's latest state is its current row.
    latest = project.rows(
        "select count(*) as n from (select station_id, max_by(deleted, version) as deleted"
        " from {schema}.meta_station_states group by station_id) where not deleted"
    )
    assert latest[0]["n"] == active
    assert project.rows("select count(*) as n from {schema}.core_history where table_name = 'meta_station'")[0]["n"] > 0


def test_an_analyst_querying_during_a_build_gets_consistent_answers(cluster_build: tuple[DbtProject, Reads]) -> None:
    """A second client reads while dbt builds through the same server: a past version stays
    exactly as it was, the newest one is always a whole Fivetran table (one active row per key),
    and the transaction ids it sees never have a gap."""
    _, reads = cluster_build
    assert len(reads.ids) >= 3, f"only {len(reads.ids)} reads overlapped the build"
    assert all(seen == reads.before for seen in reads.as_of_day_one)
    assert all(ids == list(range(1, len(ids) + 1)) for ids in reads.ids), reads.ids
    assert reads.ids[-1][-1] > reads.ids[0][-1], "no transaction committed while the client read"
    for version, rows in reads.latest:
        active = Counter(dict(row)["station_id"] for row in rows if dict(row)["_fivetran_active"])
        assert rows and set(active.values()) == {1}, f"as of transaction {version}: active rows per station {active}"


def test_a_reader_of_the_consistent_cut_during_a_build_never_sees_half_a_sync(
    cluster_build: tuple[DbtProject, Reads], connect_url: str
) -> None:
    """Each day of the demo is one sync of its three history tables, applied by three models one
    after the other. What a second client read at the consistent cut (`version_at_sql`) while
    day two was built is, row for row and table by table, what the finished build gives as of
    that cut: no table ever showed a sync that another had not applied yet."""
    from pyspark.sql import SparkSession

    project, reads = cluster_build
    spark = SparkSession.builder.remote(connect_url).getOrCreate()
    days = project.rows(
        "select sync_id, count(distinct txn_id) as ids, count(*) as tables from {schema}.lakehistory_transactions"
        " where operation = 'batch' group by sync_id"
    )
    assert sorted((r["ids"], r["tables"]) for r in days) == [(1, len(HISTORY))] * DEMO.syncs, days
    cuts = sorted({cut for cut, _ in reads.cuts})
    assert len(cuts) >= 2, f"the cut moved {len(cuts) - 1} time(s) while the client read: {cuts}"
    for cut, seen in reads.cuts:
        for table, rows in seen.items():
            assert rows == as_of(spark, project.schema, cut, table), f"{table} as of the cut {cut}"


def test_two_dbt_runs_at_once_take_turns_and_no_transaction_id_repeats(
    connect_url: str, tmp_path: Path, store_landing: StoreLanding
) -> None:
    """Two processes through one server, each applying a different history table of one sync:
    the writer lock makes one wait for the other, so the sync's id is reserved once and both
    tables record their batches under it."""
    project = store_landing.project(tmp_path / "project", "two_writers")
    generate(project.landing, GeneratorConfig(scale=2, syncs=1, seed=7), only_sync=1)
    store_landing.copy(project)
    commands = [project.process("run", "--select", model) for model in ("meta_network_history", "meta_station_history")]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)  # noqa: S603
        for command, env in commands
    ]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    said = ["\n".join(line for line in o.splitlines() if not line.lstrip().startswith("at ")) for o in outputs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(said)

    # The two tables' batches are one sync: one id, a row for each table, whichever run came first.
    rows = project.rows("select txn_id, history_table, sync_id from {schema}.lakehistory_transactions")
    assert sorted(r["txn_id"] for r in rows) == [1, 1], rows
    assert len({r["history_table"] for r in rows}) == 2 and len({r["sync_id"] for r in rows}) == 1, rows
