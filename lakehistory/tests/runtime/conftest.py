"""The Spark Connect tests' server (marker `connect`, `make test-cluster`): an S3 object store, a
standalone cluster and one Connect server on it, all on 127.0.0.1 and started once for the pytest
process. The server's warehouse is a bucket of the store, and each test's landing another bucket's
prefix, so the executors read the landing and write the tables only through the store; the
server's folder keeps its Derby metastore and its log. SPARK_REMOTE points dbt's `connect` target
and PySpark at the server while they run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from object_store import BUCKETS, LANDING_BUCKET, WAREHOUSE, StoreLanding
from standalone import Cluster, standalone_cluster

from harness import JVM_FOR_SHORT_QUERIES
from lakehistory.runtime import connect_server, jars
from lakehistory_tools.object_store import Store, seaweedfs
from lakehistory_tools.processes import free_port


@pytest.fixture(scope="session")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The store, its credentials in this process's environment for every process it starts (the
    cluster's, the server's, dbt's), and Hadoop's S3A connector cached (setup leaves it out)."""
    jars.ensure(object_store=True)
    with seaweedfs(tmp_path_factory.mktemp("object-store"), BUCKETS) as store:
        saved = {name: os.environ.get(name) for name in store.env()}
        os.environ.update(store.env())
        try:
            yield store
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, object_store: Store) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1, memory="1g") as running:
        yield running


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster, object_store: Store) -> Iterator[str]:
    lakehouse = tmp_path_factory.mktemp("connect-lakehouse")
    port = free_port()
    settings = connect_server.ServerSettings(
        lakehouse,
        port=port,
        master=cluster.url,
        driver_memory="2g",
        executor_memory="1g",
        executor_cores=1,
        total_executor_cores=2,
        warehouse=WAREHOUSE,
        # Sized for this machine's two cores, as the embedded profile is. Code generation and
        # adaptive execution stay on (the tests' embedded session turns them off: conftest.py), so
        # the project is also tested as a cluster runs it; the JVMs get the tests' JIT and
        # garbage-collector settings (harness.py, docs/decisions/0002).
        conf={
            "spark.sql.shuffle.partitions": "4",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.driver.extraJavaOptions": JVM_FOR_SHORT_QUERIES,
            "spark.executor.extraJavaOptions": JVM_FOR_SHORT_QUERIES,
            **object_store.spark_conf(),
        },
    )
    server = connect_server.start(settings, lakehouse / "server.log")
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


@pytest.fixture(scope="session")
def store_landing(object_store: Store) -> StoreLanding:
    return StoreLanding(object_store, LANDING_BUCKET)
