"""Generated day-two sequences: syncs landed one after another, history models run on schedules of
their own (random `--select`s, in random order), runs killed at random points and run again as new
processes, and syncs given up. After every run the consistent cut shows no half of a sync; at the
end each table is what the reference model says of its batches, every sync is one id shared by
its tables, in sync order, and the ids are gap-free.

The staging and the engine are called as a dbt invocation of the selected models calls them
(sync_case.run's order: every selected model stages, then each applies), on dbt's Spark session
and real Delta tables."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from engine_case import Engine, stopping
from history_case import normalize
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from sync_case import COLUMNS, batch, compile_cut, new_process, physical_by_day, visible

from harness import examples
from lakehistory.history import turn
from lakehistory.history.transactions import syncs_relation
from lakehistory.landing.batch import Sync
from lakehistory.operations.abandon import abandon_sync
from oracle.fivetran import apply_batch
from oracle.transaction_time import physical_rows

TABLES = ("a", "b", "c")
counter = iter(range(10_000))


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("schedules"), "schedules")


@pytest.fixture(scope="module")
def visible_sql(engine: Engine) -> str:
    return compile_cut(engine)[0]


def days(seed: int) -> list[dict]:
    """Syncs 1..n, each of some tables (a key and its new name per table), with what happens
    after it lands: runs of chosen tables (a kill at a point of one of their applies, maybe),
    or the sync given up by an operator with one of its batches never landed. Drawn from a seed,
    so that the first examples are as varied as the others."""
    rng = random.Random(seed)
    plan = []
    for n in range(1, rng.randint(2, 4) + 1):
        held = rng.sample(TABLES, rng.randint(1, 3))
        batches = {t: rng.randint(1, 3) for t in held}
        lost = rng.choice(held) if len(held) > 1 and rng.random() < 0.25 else None
        runs = []
        for _ in range(rng.randint(1, 2)):
            chosen = rng.sample(TABLES, rng.randint(1, 3))
            kill = (rng.choice(chosen), rng.choice(turn.STOP_POINTS)) if rng.random() < 0.4 else None
            runs.append((chosen, kill))
        plan.append({"n": n, "batches": batches, "lost": lost, "runs": runs})
    return plan


def expected(applied: list[tuple[int, dict[int, str]]], table: str) -> list[tuple]:
    """The reference's physical rows of `table` after its batches `applied` ((sequence, names) in
    order), as physical_by_day reads the engine's."""
    states: list[list[dict]] = [[]]
    for sequence, names in applied:
        states.append(apply_batch(states[-1], batch(table, sequence, None, names)))
    sequences = [s for s, _ in applied]
    return sorted(
        (
            row["id"],
            row["name"],
            row["_fivetran_start"],
            sequences[since - 1],
            sequences[until - 1] if until is not None else None,
        )
        for row, since, until in physical_rows([[normalize(r) for r in state] for state in states])
    )


def run(engine: Engine, chosen: list[str], invocation: str, project: list[str], kill: tuple[str, str] | None) -> None:
    """One dbt invocation of the chosen tables' models; killed at a point of one table's apply."""
    for i, table in enumerate(chosen):
        first = i == 0
        engine.stage(
            table, COLUMNS, ["id"], invocation, run_tables=chosen if first else (), project=project if first else ()
        )
    for table in chosen:
        if kill is not None and kill[0] == table:

            def stop(point: str, at: str = kill[1]) -> None:
                if point == at:
                    raise KeyboardInterrupt

            with pytest.MonkeyPatch.context() as patched:
                patched.setattr(turn, "reached", stopping("apply", stop))
                try:
                    engine.apply_staged(table, COLUMNS, ["id"], invocation_id=invocation, history_tables=project)
                except KeyboardInterrupt:
                    return  # the process is gone: nothing after it runs
            continue
        engine.apply_staged(table, COLUMNS, ["id"], invocation_id=invocation, history_tables=project)


def half_syncs_seen(engine: Engine, visible_sql: str) -> list[str]:
    """The syncs at or before the consistent cut that not every table of them has recorded and
    that were not given up."""
    cut = visible(engine, visible_sql)
    return [
        r["sync_id"]
        for r in engine.project.rows(
            f"""
            select s.sync_id from {syncs_relation(engine.transactions)} as s
            left join {engine.transactions} as t on t.txn_id = s.txn_id
            where s.txn_id <= {cut}
            group by s.sync_id, s.tables
            having not coalesce(max(t.operation = 'abandon'), false)
               and size(array_except(s.tables, coalesce(collect_set(t.source_table), array()))) > 0
            """
        )
    ]


@settings(
    max_examples=examples(1, 12),
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # every example runs Spark jobs: report, don't shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=st.integers(0, 2**32).map(days))
# The wedge of per-table schedules (a sync applied by b's run first), a sync one of whose batches
# never lands, and kills after a commit and after a record.
@example(
    plan=[
        {"n": 1, "batches": {"a": 1, "b": 2}, "lost": None, "runs": [(["b"], ("b", "committed")), (["a"], None)]},
        {
            "n": 2,
            "batches": {"a": 2, "b": 1, "c": 3},
            "lost": "b",
            "runs": [(["c"], None), (["a", "c"], ("a", "recorded"))],
        },
        {"n": 3, "batches": {"b": 3, "c": 1}, "lost": None, "runs": [(["c", "b"], None)]},
    ]
)
def test_per_table_schedules_kills_and_syncs_given_up_converge_on_the_reference(
    engine: Engine, visible_sql: str, plan: list[dict]
) -> None:
    prefix = f"sch{next(counter)}"
    tables = [f"{prefix}_{t}" for t in TABLES]
    project = tables
    landed: dict[str, list[tuple[int, dict[int, str]]]] = {t: [] for t in tables}
    given_up: set[str] = set()
    invocation = iter(range(1000))
    with pytest.MonkeyPatch.context() as monkeypatch:
        for day in plan:
            n = day["n"]
            held = tuple(f"{prefix}_{t}" for t in day["batches"])
            sync = Sync(f"{prefix}-s{n}", n, held)
            for t, key in day["batches"].items():
                table = f"{prefix}_{t}"
                if t == day["lost"]:
                    continue  # the connector lost this table's batch of the sync
                engine.land(table, [batch(table, n, sync, {key: f"v{n}"})])
                landed[table].append((n, {key: f"v{n}"}))
            for chosen, kill in day["runs"]:
                new_process(monkeypatch)
                names = [f"{prefix}_{t}" for t in chosen]
                target = (f"{prefix}_{kill[0]}", kill[1]) if kill else None
                run(engine, names, f"{prefix}-{next(invocation)}", project, target)
                assert half_syncs_seen(engine, visible_sql) == [], "the cut shows half a sync"
            if day["lost"] is not None:
                new_process(monkeypatch)
                run(engine, [f"{prefix}_{t}" for t in day["batches"] if t != day["lost"]], f"{prefix}-x", project, None)
                new_process(monkeypatch)
                abandon_sync(engine.project.spark, engine.writer(history_tables=project), sync.id)
                given_up.add(sync.id)
        new_process(monkeypatch)
        run(engine, tables, f"{prefix}-last", project, None)

    assert half_syncs_seen(engine, visible_sql) == []
    for table in tables:
        if not landed[table]:  # no sync held it: its model made it empty
            assert engine.physical(table) == [], table
            continue
        assert physical_by_day(engine, table) == expected(landed[table], table), table
    rows = engine.project.rows(
        f"select sync_id, txn_id, source_table, operation from {engine.transactions} where sync_id like '{prefix}-%'"
    )
    ids: dict[str, set[int]] = {}
    for r in rows:
        ids.setdefault(r["sync_id"], set()).add(r["txn_id"])
    assert all(len(found) == 1 for found in ids.values()), ids
    in_order = [min(ids[s]) for s in sorted(ids, key=lambda s: int(s.rsplit("s", 1)[1]))]
    assert in_order == sorted(in_order), "ids follow the syncs' order"
    for day in plan:
        sync_id = f"{prefix}-s{day['n']}"
        recorded = {r["source_table"] for r in rows if r["sync_id"] == sync_id and r["operation"] == "batch"}
        want = {f"{prefix}_{t}" for t in day["batches"] if t != day["lost"]}
        assert recorded == want, sync_id
        assert (sync_id in given_up) == any(r["operation"] == "abandon" for r in rows if r["sync_id"] == sync_id)
    every = sorted({r["txn_id"] for r in engine.project.rows(f"select txn_id from {engine.transactions}")})
    assert every == list(range(1, len(every) + 1)), "ids are gap-free"
