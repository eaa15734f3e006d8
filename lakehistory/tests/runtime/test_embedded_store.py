"""The embedded target (`--target local`) with its warehouse and its landing on the object store:
the same tables, row for row, as the same build on a local disk, every one of them in the bucket."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from harness import PROFILES_DIR, DbtProject, copy_project, unique_schema
from lakehistory_tools.bench import sync_tables
from lakehistory_tools.object_store import Store

BUILD_SCRIPT = Path(__file__).with_name("store_build.py")
WAREHOUSE = "s3a://lakehouse/embedded"

pytestmark = pytest.mark.connect  # beside the store the Connect tests start (runtime/conftest.py)


class Build:
    """The build in a process of its own (one embedded session a process), started at once so
    that the two builds share the two cores: `result()` waits for it and gives its schema,
    tables and their locations."""

    def __init__(self, folder: Path, store: Store | None) -> None:
        project = DbtProject(copy_project(folder / "project"), unique_schema("on_store" if store else "on_disk"))
        sync_tables.write_project(project.project_dir, 2)
        _, env = project.process()
        env |= {"LAKEHISTORY_LAKEHOUSE": str(folder / "lakehouse"), "LAKEHISTORY_DRIVER_MEMORY": "2g"}
        # PySpark would make its session a client of the Connect server: it is told so by the URL,
        # and by the flag it sets in this process once this process has made a Connect session.
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.pop(name, None)
        if store is not None:
            env |= store.profile_env() | {"LAKEHISTORY_WAREHOUSE": WAREHOUSE}
            env["LAKEHISTORY_LANDING"] = f"s3a://landing/{project.schema}"
        self.schema, self.out, self.log = project.schema, folder / "tables.pickle", folder / "build.log"
        args = [str(project.project_dir), str(PROFILES_DIR), str(project.landing), str(self.out)]
        with self.log.open("w") as said:
            self.process = subprocess.Popen(  # noqa: S603 - this venv's Python on this test's project
                [sys.executable, str(BUILD_SCRIPT), *args], stdout=said, stderr=said, env=env
            )

    def result(self) -> tuple[str, dict, dict]:
        assert self.process.wait() == 0, self.log.read_text()[-8000:]
        tables, locations = pickle.loads(self.out.read_bytes())  # noqa: S301 - this test's own file
        return self.schema, tables, locations


def test_the_embedded_target_builds_on_the_store_as_on_a_local_disk(tmp_path: Path, object_store: Store) -> None:
    disk, store = Build(tmp_path / "disk", None), Build(tmp_path / "store", object_store)
    try:
        _, on_disk, _ = disk.result()
        schema, on_store, locations = store.result()
    finally:
        for build in (disk, store):
            build.process.kill()
    assert set(on_store) == set(on_disk) >= {"sync_s001", "sync_s002", "lakehistory_transactions"}
    for table, rows in on_disk.items():
        if table != "lakehistory_transactions_writer":  # the writer lock: its last holder and lease
            assert on_store[table] == rows, f"{table} differs on the store"
    assert sum(on_disk["lakehistory_transactions"].values()) == 8, "four batches of each table"
    for table, location in locations.items():
        assert location == f"{WAREHOUSE}/{schema}.db/{table}", table
        assert any(k.startswith(f"embedded/{schema}.db/{table}/_delta_log/") for k in object_store.keys(location))
