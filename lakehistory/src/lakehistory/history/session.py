"""The Spark session a transaction is written in, and the settings of a block of its statements.

dbt runs its threads' statements on one Spark session. A history apply, or a capture's or
cleanup's transaction (apply.py, statements.py), changes session state for its own statements: Delta settings
for its commit (the commit's userMetadata, empty commits kept), temporary views (`__lh_group`,
...) and session variables (the transaction's id). In a session of its own none of that reaches
the statements other dbt threads run meanwhile: their commits carry no history transaction, and
a SHOW TABLES of theirs never lists a view that is gone a moment later.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

# The turn of one dbt thread of the process to write transactions (lock.in_process, which holds
# it around each history apply's writes); over Spark Connect, also around each history apply's
# statements in dbt's session (own_session). One lock for both, so no two threads wait on each other.
writer_turn = threading.RLock()

# A batch of at most this many rows reads only the stored rows of its keys: its statements run on
# one shuffle partition without adaptive re-planning, which would make a Spark job of each of the
# rules' many shuffles (each a few rows) and plan them one after another.
SMALL_BATCH_ROWS = 1000
SMALL_BATCH_SETTINGS = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}


@contextmanager
def own_session(spark: SparkSession) -> Iterator[SparkSession]:
    """A copy of `spark` for the block: its settings and temporary views (the staged batches
    among them) as they are now; what the block changes stays in the copy. The copy shares the
    catalog, the tables and Delta's cached table states with `spark`.

    Over Spark Connect the block gets `spark` itself: the server keeps a checkpointed DataFrame
    (the staged batches are one) with the session that made it, so a server-side copy of the
    session cannot read them. Such blocks then take turns in the process (`writer_turn`):
    their temporary views and settings are the session's, and two dbt threads must not share them
    at once. dbt's own statements in other threads run meanwhile; they read none of these views."""
    if not classic_session(spark):
        with writer_turn:
            yield spark
        return
    # Classic PySpark has no cloneSession of its own: the JVM session's copy, wrapped. Not stopped
    # after the block: stopping a classic session stops the SparkContext the two share.
    yield SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())


def classic_session(spark: SparkSession) -> bool:
    """A classic PySpark session (in this process's JVM), not a Spark Connect one."""
    return getattr(spark, "_jsparkSession", None) is not None


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The Spark session settings for the statements of the block; the previous ones after it."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, previous in before.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)
