"""dbt threads share one Spark session. A history apply changes session state for its own
statements (its commit's userMetadata, its temporary views), so it makes those changes in a copy
of the session: the statements other threads run meanwhile see none of them.

Thread counts themselves are exercised by every dbt build of the tests (the profile's four)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from engine_case import Engine

from lakehistory.history import apply, ledger
from lakehistory.landing.batch import TMAX, Batch, Column
from lakehistory.names import END, START

COLUMNS = [Column("id", "bigint"), Column("name", "string")]
AT = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("threads"), "threads")


def temporary_views(spark) -> set[str]:
    return {r.tableName for r in spark.sql("show tables").collect() if r.isTemporary}


def test_a_history_apply_leaves_dbt_s_session_as_it_was(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    spark = engine.project.spark
    seen: dict[str, str | None] = {}
    write_group = apply.write_group

    def write(session, *args, **kwargs):  # the group's commit, inside its settings
        seen["apply"] = session.conf.get(ledger.USER_METADATA, None)
        seen["dbt"] = spark.conf.get(ledger.USER_METADATA, None)
        return write_group(session, *args, **kwargs)

    monkeypatch.setattr(apply, "write_group", write)
    before = temporary_views(spark)
    row = {"id": 1, "name": "a", START: AT, END: TMAX, "_fivetran_active": True, "_fivetran_synced": AT}
    engine.land("t", [Batch(table="t", batch_id="000001", sequence=1, key=["id"], columns=COLUMNS, replace=[row])])
    assert engine.apply("t", COLUMNS, ["id"])["transactions"] == [1]

    assert [t.txn_id for t in ledger.committed_txns(seen["apply"]) or []] == [1], seen
    assert seen["dbt"] is None, "the commit's userMetadata reached the session other threads use"
    # The staged batches' view is the strategy macro's (Engine.apply registers it as the macro does).
    assert temporary_views(spark) - before == {"__lakehistory_pending__t"}
