"""Revert and undo (lakehistory.revert, lakehistory.undo): a history table back to an earlier state
as a new transaction, with its history kept, audited in the transactions table, the event history,
the feature states and the `_hx` table, and recorded even when the run stops right after its commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_case import HistoryCase, T, batch, normalize, version
from hx_case import add_derived

from harness import DbtProject, copy_project, unique_schema
from lakehistory.history import ledger
from lakehistory.landing.batch import Column
from oracle.replay import replay_events, replay_states

GAUGE = [Column("gauge_id", "bigint"), Column("label", "string"), Column("level", "double")]
KEY, DATA = ["gauge_id"], ["label", "level"]


# `make test` reverts on transaction ids; the timestamp versions run in `make test-slow`.
@pytest.fixture(scope="module", params=["integer_max", pytest.param("timestamp_null", marks=pytest.mark.slow)])
def case(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> HistoryCase:
    """Transaction ids as versions with the max as open end, and the other extreme: transaction
    times as versions with NULL open ends."""
    project = DbtProject(copy_project(tmp_path_factory.mktemp("revert")), unique_schema(f"revert_{request.param}"))
    if request.param == "timestamp_null":
        with (project.project_dir / "dbt_project.yml").open("a") as f:
            f.write("\nvars:\n  lakehistory_version_type: timestamp\n  lakehistory_open_end: 'null'\n")
    project.landing.mkdir()
    case = HistoryCase(project, "gauge", GAUGE, KEY)
    add_derived(project, "gauge", KEY)
    return case


def build(case: HistoryCase, derived: bool = True) -> None:
    """Apply the landed batches; with `derived`, build the events, states and `_hx` table too
    (they catch up on every transaction since their last build)."""
    case.project.run_ok("run", "--select", "gauge+" if derived else "gauge")


def known_after(case: HistoryCase, txn: int) -> list[dict]:
    """The history table's rows open in transaction time after `txn`, whatever its versions are
    (the transaction's id or start; a NULL or the max as open end), read without the macros."""
    version = "txn_id" if "integer" in case.project.schema else "started_at"
    at = f"(select `{version}` from {{schema}}.lakehistory_transactions where txn_id = {txn})"
    return case.project.rows(
        f"select * from {{schema}}.gauge where valid_from <= {at} and (valid_to is null or valid_to > {at})"
    )


def state(case: HistoryCase, txn: int) -> dict:
    """The Fivetran table's current rows as of a transaction: key -> data."""
    return {
        tuple(r[k] for k in KEY): tuple(r[c] for c in DATA) for r in known_after(case, txn) if r["_fivetran_active"]
    }


def fivetran(case: HistoryCase, txn: int) -> list[dict]:
    """Every valid-time version as known after a transaction (the Fivetran table then)."""
    rows = known_after(case, txn)
    return sorted(
        ({k: v for k, v in normalize(r).items() if k not in ("valid_from", "valid_to")} for r in rows), key=repr
    )


def revert(case: HistoryCase, operation: str, **args) -> None:
    case.project.run_ok("run-operation", f"lakehistory.{operation}", "--args", json.dumps(args))


def transactions(case: HistoryCase) -> list[dict]:
    return case.project.rows("select * from {schema}.lakehistory_transactions order by txn_id")


def test_revert_and_undo_return_earlier_states_as_new_audited_transactions(
    case: HistoryCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = version
    case.land(
        batch(
            "gauge",
            GAUGE,
            "gauge_id",
            1,
            "alice",
            [g(T(1), gauge_id=1, label="a", level=1.0), g(T(1), gauge_id=2, label="b", level=2.0)],
        )
    )
    case.land(
        batch(
            "gauge",
            GAUGE,
            "gauge_id",
            2,
            "bob",
            [g(T(2), gauge_id=1, label="a2", level=1.5), g(T(2), gauge_id=3, label="c", level=3.0)],
        )
    )
    case.land(
        batch(
            "gauge", GAUGE, "gauge_id", 3, "carol", [g(T(3), gauge_id=1, label="a3", level=None)], deletes=[(2, T(3))]
        )
    )
    build(case)
    assert [t["txn_id"] for t in transactions(case)] == [1, 2, 3]
    history_before = {v: fivetran(case, v) for v in (1, 2, 3)}

    # Revert to transaction 1: one new transaction, the state of 1 current again, the past kept.
    revert(case, "revert", models=["gauge"], to_version=1)
    txns = transactions(case)
    assert [t["txn_id"] for t in txns] == [1, 2, 3, 4]
    assert txns[3]["operation"] == "revert" and txns[3]["commit_message"] == "revert to transaction 1"
    assert txns[3]["history_table"] == txns[0]["history_table"] and txns[3]["source_table"] == "gauge"
    assert fivetran(case, 4) == history_before[1]
    assert {v: fivetran(case, v) for v in (1, 2, 3)} == history_before
    opened = len([r for r in known_after(case, 4) if r not in known_after(case, 3)])
    closed = len([r for r in known_after(case, 3) if r not in known_after(case, 4)])
    assert (txns[3]["versions_opened"], txns[3]["versions_closed"]) == (opened, closed) != (0, 0)
    # Asked again: the table already is as of 1, so no transaction.
    revert(case, "revert", models="gauge", to_version=1)
    assert len(transactions(case)) == 4

    # A batch after the revert, then its undo; the undo's record lost to a stop after its commit.
    case.land(batch("gauge", GAUGE, "gauge_id", 4, "dave", [g(T(4), gauge_id=2, label="b4", level=4.0)]))
    build(case, derived=False)
    assert state(case, 5)[(2,)] == ("b4", 4.0)

    def stopped(*_args, **_kwargs):
        raise RuntimeError("stopped after the commit")

    with monkeypatch.context() as patch:
        patch.setattr(ledger, "record", stopped)
        assert "stopped after the commit" in case.project.run_fails(
            "run-operation", "lakehistory.undo", "--args", json.dumps({"model": "gauge", "txn_id": 5})
        )
    build(case)  # the next writer records the undo from its commit
    txns = transactions(case)
    assert [t["txn_id"] for t in txns] == [1, 2, 3, 4, 5, 6]
    assert txns[5]["operation"] == "revert" and txns[5]["commit_message"] == "undo of transaction 5 (batch 000004)"
    assert fivetran(case, 6) == fivetran(case, 4)

    # Transaction 2 changed keys that transactions 3 and 4 changed again: refused, naming them.
    error = case.project.run_fails(
        "run-operation", "lakehistory.undo", "--args", json.dumps({"model": "gauge", "txn_id": 2})
    )
    assert "later transactions changed the same keys: 3 (batch 000003), 4" in error, error
    assert len(transactions(case)) == 6

    # The _hx table's current rows (the main table) too.
    main = case.project.rows("select * from {schema}.gauge_main")
    assert {tuple(r[k] for k in KEY): tuple(r[c] for c in DATA) for r in main} == state(case, 6)

    # Events and feature states replay to the table's state as of every transaction, reverts included.
    events = case.project.rows("select * from {schema}.gauge_events")
    states = case.project.rows("select * from {schema}.gauge_states")
    for txn in range(1, 7):
        want = state(case, txn)
        assert replay_events(events, KEY, DATA, txn) == want, txn
        assert replay_states(states, KEY, DATA, txn) == want, txn
    reverted = {(e["gauge_id"], e["_hist_event"]) for e in events if e["_hist_trans_id"] == 4}
    assert reverted == {(1, 3), (1, 4), (2, 1), (3, 2)}  # a3 back to a, b back, c gone


def test_rewind_returns_chosen_keys_to_an_earlier_state(case: HistoryCase) -> None:
    """Naksha's rewind of a feature (seed 002): chosen keys back to how they were as of a
    transaction, by a list of keys or by a predicate, as one audited transaction; the table's other
    keys stay as they are, and the event history and feature states follow. Runs after the test
    above, on its table: after transaction 6 it holds gauges 1 (a) and 2 (b)."""
    last = transactions(case)[-1]["txn_id"]
    assert state(case, last) == {(1,): ("a", 1.0), (2,): ("b", 2.0)}
    assert state(case, 2) == {(1,): ("a2", 1.5), (2,): ("b", 2.0), (3,): ("c", 3.0)}

    revert(case, "rewind", model="gauge", to_version=2, keys=[[1]])
    rewound = transactions(case)[-1]
    assert (rewound["txn_id"], rewound["operation"]) == (last + 1, "revert")
    assert rewound["commit_message"] == "rewind of 1 key(s) to transaction 2"
    assert state(case, last + 1) == {(1,): ("a2", 1.5), (2,): ("b", 2.0)}, "gauge 2 stays; gauge 3 is not chosen"

    revert(case, "rewind", model="gauge", to_version=2, where="gauge_id = 3")
    assert transactions(case)[-1]["commit_message"] == "rewind of the keys where gauge_id = 3 to transaction 2"
    assert state(case, last + 2) == state(case, 2), "gauge 3 back as it was"
    revert(case, "rewind", model="gauge", to_version=2, where="gauge_id = 3")  # asked again: done already
    assert transactions(case)[-1]["txn_id"] == last + 2

    for args, said in (
        ({"keys": [["x"]]}, "rewind: key ['x'] of gauge is not of its key's types (gauge_id bigint)"),
        ({"keys": []}, "give exactly one of keys"),
        ({"keys": [[1]], "where": "gauge_id = 1"}, "give exactly one of keys"),
        ({"keys": [[1, 2]]}, "rewind: key [1, 2] has 2 value(s); gauge's key is gauge_id"),
    ):
        request = json.dumps({"model": "gauge", "to_version": 1, **args})
        error = case.project.run_fails("run-operation", "lakehistory.rewind", "--args", request)
        assert said in error, error
    assert transactions(case)[-1]["txn_id"] == last + 2, "a refused rewind writes nothing"

    build(case)
    events = case.project.rows("select * from {schema}.gauge_events")
    states = case.project.rows("select * from {schema}.gauge_states")
    for txn in range(1, last + 3):
        assert replay_events(events, KEY, DATA, txn) == state(case, txn), txn
        assert replay_states(states, KEY, DATA, txn) == state(case, txn), txn
