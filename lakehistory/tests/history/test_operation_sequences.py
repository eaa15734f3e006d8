"""Whole sequences of operations from a seed, on the engine alone, against a reference model: batches
landed and applied per table (a `dbt run --select` each), runs killed at any stop point of the apply
and run again, a branch created, run, published (or its publish killed at any stop point, then asked
again, or after its branch was dropped by hand asked again or given up) and dropped, reverts of one
table to a transaction or a tag (killed at any stop point of the writer's turn, then asked again or
given up), undos of the last transaction (killed, then asked again), tags, OPTIMIZE and VACUUM of
main. After every step each table of main and of the branch holds what the reference says,
ids are gap-free, no batch is recorded twice, and no operation holds a table (the cut is never
stuck).

The reference is written from the rules, not from the product: a batch gives its keys its names
(each batch is dated after the last, so it restates them); main applies every landed batch of a
table it has not applied, in order; a branch starts as main at its fork; a publish gives main the
tables the branch changed, as the branch has them, unless main changed one of them after the fork
(refused, nothing changed); a publish or a revert given up keeps what its tables had committed; a
revert gives a table what it held after the transaction named; an undo of the last transaction
gives every table what it held before it."""

from __future__ import annotations

import contextlib
import copy
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from branch_case import TABLES, branch_of, create, current, drop, lakehouse, land, on_branch, publish, tables_of
from engine_case import Engine, stopping
from sync_case import COLUMNS, assert_known_is_the_table, new_process

from lakehistory.errors import HistoryError
from lakehistory.history import syncs, turn
from lakehistory.history.session import session_conf
from lakehistory.operations import abandon, branches, tags
from lakehistory.transaction_parts import each_part

STEPS = 16


@dataclass
class Held:
    """What the reference says a lakehouse holds: each table's names by key, and the batches
    (sequences) each table applied."""

    names: dict[str, dict[int, str]] = field(default_factory=lambda: {t: {} for t in TABLES})
    applied: dict[str, set[int]] = field(default_factory=lambda: {t: set() for t in TABLES})


@dataclass
class Operations:
    main: Engine
    rng: random.Random
    landed: dict[str, dict[int, dict[int, str]]] = field(default_factory=lambda: {t: {} for t in TABLES})
    held: Held = field(default_factory=Held)
    branch: Held | None = None
    fork: int = 0
    branch_changed: list[str] = field(default_factory=list)  # in the order the branch first changed them
    after: dict[int, Held] = field(default_factory=dict)  # main as it was after each transaction
    tags: dict[str, int] = field(default_factory=dict)  # each tag's transaction
    log: list[str] = field(default_factory=list)

    # --- the reference's rules ------------------------------------------------------------------

    def pending(self, held: Held, table: str) -> list[int]:
        return sorted(set(self.landed[table]) - held.applied[table])

    def applies(self, held: Held, table: str) -> None:
        for n in self.pending(held, table):
            held.names[table].update(self.landed[table][n])
            held.applied[table].add(n)

    # --- the steps --------------------------------------------------------------------------------

    def land(self) -> None:
        table = self.rng.choice(TABLES)
        n = max((max(s) for s in self.landed.values() if s), default=0) + 1
        names = {k: f"{table}{n}k{k}" for k in self.rng.sample(range(1, 5), self.rng.randint(1, 2))}
        self.landed[table][n] = names
        land(self.main, table, n, names)
        self.log.append(f"land {table} {n}")

    def apply(self, monkeypatch: pytest.MonkeyPatch) -> None:
        table = self.rng.choice(TABLES)
        point = self.rng.choice([None, None, *turn.STOP_POINTS])
        self.log.append(f"apply {table}" + (f" killed at {point}" if point else ""))
        if point is not None:
            with monkeypatch.context() as patched:
                patched.setattr(turn, "reached", stopping("apply", _stop_at(point)))
                with contextlib.suppress(StoppedError):  # a point the run did not reach: it ran whole
                    self.main.apply(table, COLUMNS, ["id"])
            new_process(monkeypatch)
            self.main.new_process()
        self.main.apply(table, COLUMNS, ["id"])  # a run stopped is run again
        self.applies(self.held, table)

    def create_branch(self) -> None:
        self.log.append("branch create")
        create(self.main, "seq")
        self.branch, self.fork, self.branch_changed = copy.deepcopy(self.held), last_id(self.main), []

    def apply_on_branch(self) -> None:
        assert self.branch is not None
        table = self.rng.choice(TABLES)
        self.log.append(f"branch apply {table}")
        if self.pending(self.branch, table) and table not in self.branch_changed:
            self.branch_changed.append(table)
        on_branch(self.main, "seq").apply(table, COLUMNS, ["id"])
        self.applies(self.branch, table)

    def publish(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert self.branch is not None
        moved = [t for t in self.branch_changed if last_of(self.main, t) > self.fork]
        point = self.rng.choice([None, None, *turn.RESERVED_STOP_POINTS])
        self.log.append(f"branch publish (main moved: {moved})" + (f" killed at {point}" if point else ""))
        if not self.branch_changed or moved:
            with pytest.raises(HistoryError, match="nothing to publish|cannot be published"):
                publish(self.main, "seq")
            assert drop(self.main, "seq")
            self.branch = None
            return
        if point is None:
            publish(self.main, "seq")
            self.published(self.branch_changed)
            return
        with monkeypatch.context() as patched:
            patched.setattr(turn, "reached", stopping("publish_branch", _stop_at(point)))
            with pytest.raises(StoppedError):
                publish(self.main, "seq")
        new_process(monkeypatch)
        self.main.new_process()
        if point == "recorded":  # recorded: only the branch's drop is left
            self.published(self.branch_changed, dropped=False)
            assert drop(self.main, "seq")
        elif self.rng.random() < 0.5:
            self.log.append("branch publish asked again")
            publish(self.main, "seq")
            self.published(self.branch_changed)
        elif self.rng.random() < 0.5:
            self.log.append("branch dropped by hand, its publish asked again")
            self.main.project.spark.sql(f"drop schema `{self.main.project.schema}__seq` cascade")
            publish(self.main, "seq")  # from what it read before it reserved
            self.published(self.branch_changed)
        else:
            self.log.append("branch dropped by hand, its publish given up")
            with pytest.raises(HistoryError, match="abandon_sync"):
                drop(self.main, "seq")
            self.main.project.spark.sql(f"drop schema `{self.main.project.schema}__seq` cascade")
            stopped = [o for o in syncs.operations(self.main.project.spark, self.main.transactions) if o.waiting]
            writer = self.main.writer(history_tables=TABLES)
            abandon.abandon_sync(self.main.project.spark, writer, stopped[0].reserved.sync.id)
            # the first table it changed had committed when the publish stopped after a commit
            self.published(self.branch_changed[:1] if point == "committed" else [])
        self.branch = None

    def maintain(self) -> None:
        """OPTIMIZE and VACUUM (no retention) of a main table, as the docs recommend; a branch whose
        clone read a file it removed is refused before its publish reserves anything, and dropped."""
        table = self.rng.choice(TABLES)
        self.log.append(f"optimize and vacuum {table}")
        spark = self.main.project.spark
        spark.sql(f"optimize {self.main.target(table)}")
        with session_conf(spark, {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}):
            spark.sql(f"vacuum {self.main.target(table)} retain 0 hours")
        if self.branch is None:
            return
        on = on_branch(self.main, "seq")
        gone = [t for t in TABLES if branches.unreadable(spark, on.target(t), self.main.target(t))]
        if not gone:
            return
        self.log.append(f"the branch reads files the VACUUM removed ({gone}): dropped")
        if set(gone) & set(self.branch_changed):  # what a publish would read: refused, nothing reserved
            schema = f"{self.main.project.schema}__seq"
            found = [(branch_of(self.main, "seq"), schema, tables_of(self.main, "seq"))]
            (shown,) = branches.listed(spark, self.main.writer(history_tables=TABLES), found)
            assert "removed by a VACUUM" in shown["reason"], shown
            last = last_id(self.main)
            with pytest.raises(HistoryError, match="cannot be read"):
                publish(self.main, "seq")
            assert last_id(self.main) == last
        self.drop_branch()

    def published(self, tables: list[str], dropped: bool = True) -> None:
        assert self.branch is not None
        for table in tables:
            self.held.names[table] = dict(self.branch.names[table])
            self.held.applied[table] |= self.branch.applied[table]
        if dropped:
            self.branch = None

    def drop_branch(self) -> None:
        self.log.append("branch drop")
        assert drop(self.main, "seq")
        self.branch = None

    def revert(self, monkeypatch: pytest.MonkeyPatch) -> None:
        table = self.rng.choice(TABLES)
        to = self.rng.choice(sorted(self.after))
        tagged = [t for t, n in self.tags.items() if n in self.after]
        if tagged and self.rng.random() < 0.5:  # to a tag, by its name
            name = self.rng.choice(tagged)
            to = self.tagged(name)
            self.log.append(f"tag {name} read: {to}")
        point = self.rng.choice([None, None, *turn.OPERATION_STOP_POINTS])
        self.log.append(f"revert {table} to {to}" + (f" killed at {point}" if point else ""))
        wanted = dict(self.after[to].names[table])
        if point is not None:
            with monkeypatch.context() as patched:
                patched.setattr(turn, "reached", stopping("revert", _stop_at(point)))
                with contextlib.suppress(StoppedError):  # a revert with nothing to change reserves nothing
                    self.main.revert([table], ["id"], to_txn=to)
            new_process(monkeypatch)
            self.main.new_process()
            spark, log = self.main.project.spark, self.main.transactions
            stopped = [o for o in syncs.operations(spark, log) if o.waiting]
            if stopped and self.rng.random() < 0.5:
                self.log.append("revert given up")
                abandon.abandon_sync(spark, self.main.writer(history_tables=TABLES), stopped[0].reserved.sync.id)
                if point != "committed":  # else its one table had committed it: recorded, it is whole
                    wanted = self.held.names[table]
                self.held.names[table] = dict(wanted)
                return
        self.main.revert([table], ["id"], to_txn=to)  # a revert stopped is asked again
        self.held.names[table] = wanted

    # --- the checks -------------------------------------------------------------------------------

    def check(self) -> None:
        steps = "; ".join(self.log)
        for table in TABLES:
            assert current(self.main, table) == self.held.names[table], f"main {table} after: {steps}"
            if self.branch is not None:
                got = current(on_branch(self.main, "seq"), table)
                assert got == self.branch.names[table], f"branch {table} after: {steps}"
        log = self.main.transactions
        rows = self.main.project.rows(f"select txn_id, history_table from {log}")
        ids = sorted({r["txn_id"] for r in rows})
        assert ids == list(range(1, len(ids) + 1)), f"ids {ids} after: {steps}"
        assert len(rows) == len({(r["txn_id"], r["history_table"]) for r in rows}), f"a table twice in: {steps}"
        parts = each_part(self.main.project.spark.table(log)).where("operation = 'batch'")
        batches = [(r.source_table, r.batch_id) for r in parts.select("source_table", "batch_id").collect()]
        assert len(batches) == len(set(batches)), f"a batch recorded twice after: {steps}"
        found = syncs.operations(self.main.project.spark, log)
        held = [o.reserved.sync.id for o in found if o.waiting]
        assert not held, f"{held} hold tables after: {steps}"
        assert_known_is_the_table(self.main)
        if ids:
            self.after[ids[-1]] = copy.deepcopy(self.held)

    def undo(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Undo main's last transaction (naming no table: every table it changed), perhaps killed at
        a stop point of the turn and asked again: main is as it was before it, with every batch
        still applied. A given-up sync's row is not undone, and is not asked."""
        last = last_id(self.main)
        operations = {r["operation"] for r in self.main.project.rows(self._of(last))}
        if last - 1 not in self.after or last - 1 < 1 or not operations <= {"batch", "revert"}:
            return
        point = self.rng.choice([None, None, *turn.OPERATION_STOP_POINTS])
        self.log.append(f"undo {last}" + (f" killed at {point}" if point else ""))
        if point is not None:
            with monkeypatch.context() as patched:
                patched.setattr(turn, "reached", stopping("undo", _stop_at(point)))
                with contextlib.suppress(StoppedError):
                    self.main.revert(TABLES, ["id"], undo_txn=last, named=False)
            new_process(monkeypatch)
            self.main.new_process()
        self.main.revert(TABLES, ["id"], undo_txn=last, named=False)
        for table in TABLES:
            self.held.names[table] = dict(self.after[last - 1].names[table])

    def _of(self, txn_id: int) -> str:
        return f"select operation from {self.main.transactions} where txn_id = {int(txn_id)}"

    def tag(self) -> None:
        """Tag main's last transaction; a later revert may go to a tag, read back by its name."""
        last = last_id(self.main)
        name = f"t{len(self.tags) + 1}"
        self.log.append(f"tag {name} = {last}")
        writer = self.main.writer(history_tables=TABLES)
        assert tags.tag(self.main.project.spark, writer, name, last, last, "ana", None)["txn_id"] == last
        self.tags[name] = last

    def tagged(self, name: str) -> int:
        relation = tags.tags_relation(self.main.transactions)
        return int(self.main.project.rows(f"select txn_id from {relation} where tag = '{name}'")[0]["txn_id"])


class StoppedError(RuntimeError):
    """A run stopped at a named point, as a kill there would stop it."""


def _stop_at(point: str):  # noqa: ANN202 - a stand-in for a module's _reached
    def reached(name: str) -> None:
        if name == point:
            raise StoppedError(f"stopped at {point}")

    return reached


def last_id(engine: Engine) -> int:
    return int(engine.project.rows(f"select max(txn_id) as n from {engine.transactions}")[0]["n"] or 0)


def last_of(engine: Engine, table: str) -> int:
    target = engine.target(table)
    log = engine.transactions
    found = engine.project.rows(f"select max(txn_id) as n from {log} where history_table = '{target}'")
    return int(found[0]["n"] or 0)


@pytest.fixture(scope="module")
def folder(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Engine.start(tmp_path_factory.mktemp("sequences"), "sequences").project.project_dir


@pytest.mark.parametrize("seed", [1, *(pytest.param(s, marks=pytest.mark.slow) for s in (2, 3, 4, 5))])
def test_random_sequences_of_operations_keep_every_table_as_the_reference_says(
    folder: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    case = Operations(lakehouse(folder, f"seq{seed}"), rng)
    for n, table in enumerate(TABLES, start=1):  # every table exists before a branch clones it
        case.landed[table][n] = {1: f"{table}0"}
        land(case.main, table, n, {1: f"{table}0"})
        case.main.apply(table, COLUMNS, ["id"])
        case.applies(case.held, table)
    case.check()
    for _ in range(STEPS):
        steps = [case.land, case.land, lambda: case.apply(monkeypatch), lambda: case.revert(monkeypatch)]
        steps += [case.maintain, lambda: case.undo(monkeypatch), case.tag]
        if case.branch is None:
            steps += [case.create_branch]
        else:
            steps += [case.apply_on_branch, case.apply_on_branch, lambda: case.publish(monkeypatch)]
            steps += [case.drop_branch]
        rng.choice(steps)()
        case.check()
