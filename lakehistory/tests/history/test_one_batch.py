"""A group of one batch takes the rules as one plan (history/one_batch.py); every other group
takes their two steps (rules.py). Both give one change set, row for row: the stored rows a
batch closes, the rows it inserts with their ends, what leaves the Fivetran table, clashes and
versions put below a row still there. test_catch_up.py holds both to the reference model."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from engine_case import VERSIONING, Engine
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_catch_up import without_earliest

from harness import examples
from lakehistory.errors import HistoryError
from lakehistory.history.group import compute_changes
from lakehistory.history.rules import CANDIDATES_VIEW, candidates_sql, changes_sql
from lakehistory.history.staged import staged_batches
from lakehistory.history.table import layout_of
from oracle.streams import batch_streams, deleted_column_of


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("one_batch"), "one_batch")


counter = iter(range(10_000))


@settings(
    max_examples=examples(8, 25),
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # every example runs Spark jobs: report, don't shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=batch_streams(max_batches=4, max_keys=3, max_events=3), data=st.data())
def test_a_group_of_one_batch_gets_the_changes_of_the_two_step_plan(engine: Engine, stream, data) -> None:
    columns, key, batches = stream
    # Without earliest starts, versions may go below rows still there or repeat a stored start.
    batches = [without_earliest(b) if i > 0 and data.draw(st.integers(0, 2)) == 0 else b for i, b in enumerate(batches)]
    table = f"o{next(counter)}"
    engine.land(table, batches[:1])
    engine.apply(table, columns, key)
    if len(batches) > 2:  # the table holds the history of all but the last batch, or up to a refused one
        engine.land(table, batches[1:-1])
        with contextlib.suppress(HistoryError):
            engine.apply(table, columns, key, per_commit=1)
    engine.land(table, batches[1:][-1:])
    spark = engine.project.spark
    staged = f"`__lakehistory_pending__{table}`"
    engine.stage(table, columns, key)
    pending = staged_batches(spark, staged, key[0])
    if not pending:  # a one-batch stream, or the last batch re-delivers one applied before it
        return
    target = engine.target(table)
    layout = layout_of(spark, staged, key, deleted_column_of(columns), table=target)

    one_plan = compute_changes(spark, target, staged, layout, VERSIONING, pending[:1]).frame
    # the two steps over the same staged and stored rows (the views compute_changes left)
    spark.sql(candidates_sql(layout)).localCheckpoint().createOrReplaceTempView(CANDIDATES_VIEW)
    two_steps = spark.sql(changes_sql(layout))

    assert one_plan.schema.simpleString() == two_steps.schema.simpleString()
    assert sorted(map(repr, one_plan.collect())) == sorted(map(repr, two_steps.collect())), (
        f"batch {pending[0].batch_id}"
    )
