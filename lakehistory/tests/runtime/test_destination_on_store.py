"""`lakehistory destination` with its landing root in the S3 store, as a deployment beside a
cluster has it: what it lands there (each batch's files copied into place, the manifest last)
the cluster builds into the history the reference model gives; a retried request lands once, and
a batch folder left without its manifest is gone once the table's next request has run."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fivetran_case import EVERY_REQUEST_ANSWERED, INPUTS, answers, assert_histories
from object_store import StoreLanding

from lakehistory.destination.project import write_models
from lakehistory.destination.server import Server
from lakehistory.destination.store import Store
from lakehistory_tools.fivetran_tester import FivetranConnection
from lakehistory_tools.object_store import Store as ObjectStore

pytestmark = pytest.mark.connect

HALF = "000099-0123456789abcdef"


def test_a_destination_on_object_storage_lands_what_the_cluster_builds(
    connect_url: str,
    object_store: ObjectStore,
    store_landing: StoreLanding,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAKEHISTORY_S3_ENDPOINT", object_store.endpoint)
    project = store_landing.project(tmp_path / "project", "destination")
    root = project.landing_root  # s3a://landing/<the project's schema>
    server = Server(port=0, host="127.0.0.1")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            fivetran = FivetranConnection(channel, {"landing_root": root})
            fivetran.run_file(INPUTS / "01_readme_example.json")
            table = fivetran.tables["transaction"]
            # What a server killed while copying a batch into place leaves: files without a manifest.
            with Store(root).open_output(f"{Store(root).path('tester', 'transaction', HALF)}/replace_0.csv.zst") as out:
                out.write(b"not all of a batch")
            last = [s for s in fivetran.sent if s.request == "WriteHistoryBatch"][-1]
            fivetran.send(table, last.files, last.synced)  # a retry: new files and keys, the same batch
            fivetran.sent.pop()
    finally:
        server.stop(grace=10)
    store = Store(root)
    assert answers(fivetran) == EVERY_REQUEST_ANSWERED
    batches = store.folders(store.path("tester", "transaction"))
    assert HALF not in batches  # the table's next request removed it
    assert len(batches) == 7  # its alter, five history batches and a truncate: the retry landed nothing
    assert all(store.exists(store.path("tester", "transaction", b, "manifest.json")) for b in batches)

    write_models(store, "tester", "tester", project.project_dir / "models" / "fivetran")
    project.run_ok("run", "--select", "path:models/fivetran")
    assert_histories(project, fivetran, store, "tester")
