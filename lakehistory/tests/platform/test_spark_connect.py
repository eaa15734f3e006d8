"""The same project, unchanged, on a Spark Connect server (profile target `connect`).

Runs in its own pytest process (`make test-connect`): a Connect client and the embedded
session of the other tests do not belong in one process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness import PROFILES_DIR, DbtProject, copy_project, unique_schema
from lakehistory.platform import connect_server
from lakehistory_tools.generator import GeneratorConfig, generate

pytestmark = pytest.mark.connect


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory):
    lakehouse = tmp_path_factory.mktemp("connect-lakehouse")
    port = free_port()
    server = connect_server.start(connect_server.ServerSettings(lakehouse, port=port), lakehouse / "server.log")
    url = f"sc://127.0.0.1:{port}"
    os.environ["SPARK_REMOTE"] = url
    try:
        yield url
    finally:
        from pyspark.sql import SparkSession

        # Release the client's session while the server still runs: a session left open is
        # released at exit, against a stopped server, with minutes of retries. dbt made it in a
        # worker thread, so it is the client's default session, not this thread's active one.
        SparkSession.builder.remote(url).getOrCreate().stop()
        os.environ.pop("SPARK_REMOTE", None)
        server.terminate()
        server.wait(timeout=60)


def test_sql_and_python_models_seeds_and_snapshots_run_over_connect(connect_url: str, tmp_path: Path) -> None:
    project = DbtProject(copy_project(tmp_path / "project"), unique_schema("connect"), target="connect")
    # Two days of the CRMP demo through both paths: batches merged, extracts snapshotted, _hx built.
    config = GeneratorConfig(scale=2, syncs=2, seed=5)
    for sync in (1, 2):
        generate(project.landing, config, extract_tables=["meta_history", "meta_vars"], only_sync=sync)
        project.run_ok("build")

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(connect_url).getOrCreate()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), "assertions must read through Connect too"
    seed = {r["vars_id"]: r for r in project.rows("select * from {schema}.platform_variables_seed")}
    assert seed[2]["precision"] is None and seed[3]["display_name"] == "Wind direction (O'Brien vane)"
    counts = {r["unit"]: r["variable_count"] for r in project.rows("select * from {schema}.platform_unit_counts")}
    assert sum(counts.values()) == len(seed)
    catalog = project.rows("select vars_id from {schema}.platform_variable_catalog")
    assert sorted(r["vars_id"] for r in catalog) == sorted(seed)
    assert project.rows("select count(*) as n from {schema}.platform_variables_snapshot")[0]["n"] == len(seed)
    assert project.rows("select count(*) as n from {schema}.platform_variable_first_seen")[0]["n"] == len(seed)
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


def test_two_dbt_runs_at_once_take_turns_and_no_transaction_id_repeats(connect_url: str, tmp_path: Path) -> None:
    """Two processes through one server, each applying a different history table: the writer
    lock makes one wait for the other, so every transaction id is taken once."""
    project = DbtProject(copy_project(tmp_path / "project"), unique_schema("two_writers"), target="connect")
    generate(project.landing, GeneratorConfig(scale=2, syncs=1, seed=7), only_sync=1)
    env = {**os.environ, "LAKEHISTORY_SCHEMA": project.schema, "LAKEHISTORY_LANDING": str(project.landing)}
    dbt = Path(sys.executable).parent / "dbt"
    runs = [
        subprocess.Popen(  # noqa: S603 - the venv's own dbt, on this test's project
            [str(dbt), "--no-use-colors", "run", "--target", "connect", "--select", model]
            + ["--project-dir", str(project.project_dir), "--profiles-dir", str(PROFILES_DIR)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for model in ("meta_network_history", "meta_station_history")
    ]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    said = ["\n".join(line for line in o.splitlines() if not line.lstrip().startswith("at ")) for o in outputs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(said)

    ids = [r["txn_id"] for r in project.rows("select txn_id from {schema}.lakehistory_transactions order by txn_id")]
    assert ids == list(range(1, len(ids) + 1)), ids
    tables = {r["history_table"] for r in project.rows("select history_table from {schema}.lakehistory_transactions")}
    assert len(tables) == 2, tables
