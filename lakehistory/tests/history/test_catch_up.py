"""Catch-up: pending batches applied together give exactly the tables that applying them one at a
time gives, and that the reference model implies, in valid time and in transaction time (every
as-of state), with the same transactions and counts.

The staging and the merge engine are called as the strategy macro calls them, on dbt's Spark
session and real Delta tables, without a dbt invocation per step (tests/history/test_fivetran_history.py
runs the same engine through dbt)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from pathlib import Path

import pytest
from engine_case import Engine, stopping
from history_case import normalize
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from harness import examples
from lakehistory.errors import HistoryError
from lakehistory.history import ledger, lock, turn
from lakehistory.landing import folders, run_reads
from lakehistory.landing.batch import TMAX, Batch, Column, SchemaChange
from lakehistory.landing.manifests import Applied, Landed, applied_batches_for, read_landed
from lakehistory.landing.spec import BatchError
from lakehistory.names import EARLIEST, END, START
from oracle.fivetran import apply_batch, key_of
from oracle.streams import batch_streams
from oracle.transaction_time import ordered, physical_rows


@pytest.fixture(scope="module")
def engine(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return Engine.start(tmp_path_factory.mktemp("catch_up"), "catch_up")


def without_earliest(batch: Batch) -> Batch:
    """The batch with no earliest start for any key (the landing format allows it): nothing is
    overlap-deleted or closed by rule 8, and versions may land below rows still there."""
    strip = [{k: v for k, v in r.items() if k != EARLIEST} for r in batch.replace]
    strip_u = [{k: v for k, v in r.items() if k != EARLIEST} for r in batch.update]
    return dataclasses.replace(batch, replace=strip, update=strip_u, earliest=[])


def expected(batches: list[Batch], columns) -> tuple[list, Batch | None]:
    """The reference's physical rows up to the first batch whose version repeats a (key, start) a
    row still has (the engine refuses it), and that batch."""
    names = [c.name for c in columns]
    states: list[list[dict]] = [[]]
    refused = None
    for b in batches:
        after = apply_batch(states[-1], b)
        starts = [(key_of(r, b.key), r[START]) for r in after]
        if len(set(starts)) < len(starts):
            refused = b
            break
        states.append(after)
    shaped = [[normalize({n: r.get(n) for n in (*names, *SYSTEM)}) for r in s] for s in states]
    return physical_rows(shaped), refused


SYSTEM = ("_fivetran_start", "_fivetran_end", "_fivetran_active", "_fivetran_synced")
counter = iter(range(10_000))


@settings(
    max_examples=examples(4, 10),
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # every example runs Spark jobs: report, don't shrink
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=batch_streams(max_batches=5, max_keys=3, max_events=3), data=st.data())
def test_catch_up_equals_one_at_a_time_and_the_reference(engine: Engine, stream, data) -> None:
    columns, key, batches = stream
    # Some batches lose their earliest starts: versions may then go below rows still there (the
    # catch-up ends its group there) or repeat a stored start (the batch is refused).
    batches = [without_earliest(b) if i > 0 and data.draw(st.integers(0, 3)) == 0 else b for i, b in enumerate(batches)]
    want, refused = expected(batches, columns)
    # Files of every format, compression and column order: one run reads them together.
    options = [
        {
            "file_format": data.draw(st.sampled_from(["csv", "csv", "parquet"])),
            "compression": data.draw(st.sampled_from(["none", "gzip"])),
            "earliest_form": data.draw(st.sampled_from(["file", "column"])),
            "rng": random.Random(b.sequence),
        }
        for b in batches
    ]
    name = f"s{next(counter)}"
    results = {}
    for mode, per_commit in (("all", None), ("one", 1)):
        table = f"{name}_{mode}"
        engine.land(table, batches, options)
        if refused is None:
            engine.apply(table, columns, key, per_commit)
        else:
            with pytest.raises(HistoryError, match=refused.batch_id):
                engine.apply(table, columns, key, per_commit)
        results[mode] = (engine.physical(table), engine.transactions_of(table))
    catch_up, one_at_a_time = results["all"], results["one"]
    assert catch_up[0] == want, "catch-up differs from the reference"
    assert one_at_a_time[0] == want, "one at a time differs from the reference"
    assert catch_up[1] == one_at_a_time[1], "the transactions' counts differ"


@pytest.mark.parametrize("width", [29, 64])
def test_a_table_of_many_columns_gets_its_history(engine: Engine, width: int) -> None:
    """Delta keeps file statistics of a table's first 32 columns by default, and the history
    table's clustering needs them of its version column, which comes after the source's columns:
    a source of 29 columns or more (two keys, odd names among them) is as any other."""
    key = ["tenant id", "id"]
    names = [f"c{c:02d}" if c % 7 else f"col {c}.x" for c in range(width - len(key))]
    columns = [Column("tenant id", "string"), Column("id", "bigint")] + [
        Column(n, ("string", "double", "bigint", "boolean")[c % 4]) for c, n in enumerate(names)
    ]
    values = {"string": lambda k, n: f"{k} v{n}", "double": lambda k, n: k + n / 10, "bigint": lambda k, n: k * n}
    values["boolean"] = lambda k, n: (k + n) % 2 == 0

    def version(k: int, n: int) -> dict:
        start = dt.datetime(2024, 1, n, tzinfo=dt.UTC)
        data = {c.name: values[c.type](k, n) for c in columns[2:]}
        system = {START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
        return {"tenant id": f"t{k % 2}", "id": k, **data, **system}

    table = f"wide{width}"
    batches = [
        Batch(table, "000001", 1, key, columns, replace=[version(k, 1) for k in range(1, 6)]),
        Batch(
            table,
            "000002",
            2,
            key,
            columns,
            replace=[version(k, 2) for k in (2, 4)],
            earliest=[
                {"tenant id": f"t{k % 2}", "id": k, START: dt.datetime(2024, 1, 2, tzinfo=dt.UTC)} for k in (2, 4)
            ],
        ),
    ]
    engine.land(table, batches)
    engine.apply(table, columns, key)
    assert engine.physical(table) == expected(batches, columns)[0]


def test_a_run_asks_only_about_the_batches_in_its_landing_folder(engine: Engine) -> None:
    """Which landed batches were applied: the answer is as large as the landing folder (landed
    batches may be archived once applied), however many batches the table applied before."""
    columns, start = [Column("id", "bigint"), Column("name", "string")], dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for n in (1, 2, 3):
        row = {"id": n, "name": "x", START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
        engine.land("archived", [Batch("archived", f"{n:06d}", n, ["id"], columns, replace=[row])])
        engine.apply("archived", columns, ["id"])
    spark = engine.project.spark
    for asked, answer in (
        (["000003", "000004"], Applied(frozenset({"000003"}), 3)),
        ([], Applied(frozenset(), 3)),
    ):
        assert applied_batches_for(spark, engine.transactions, {"archived": asked}) == {"archived": answer}
    never = applied_batches_for(spark, engine.transactions, {"never_landed": ["000001"]})
    assert never == {"never_landed": Applied(frozenset(), None)}


ROW_COLUMNS = [Column("id", "bigint"), Column("name", "string")]


def one_row(table: str, n: int, name: str = "x") -> Batch:
    start = dt.datetime(2024, 1, n, tzinfo=dt.UTC)
    row = {"id": n, "name": name, START: start, END: TMAX, "_fivetran_active": True, "_fivetran_synced": start}
    return Batch(table, f"{n:06d}", n, ["id"], ROW_COLUMNS, replace=[row])


def test_a_run_reads_every_landed_table_at_once_and_each_answer_is_taken_once(engine: Engine) -> None:
    """The first staging of an invocation reads the manifests and the applied batches of every
    table the invocation stages; each table gets what it would have read alone, a table whose
    manifests are bad gets its own error, and a second staging of a table reads again."""
    spark, root = engine.project.spark, str(engine.project.landing)
    engine.land("rr_a", [one_row("rr_a", 1)])
    engine.apply("rr_a", ROW_COLUMNS, ["id"])
    engine.land("rr_a", [one_row("rr_a", 2)])
    engine.land("rr_b", [one_row("rr_b", 1), one_row("rr_b", 2)])
    (engine.project.landing / "rr_b" / "000002" / "manifest.json").write_text('{"format_version": 1, "table": ')
    engine.land("rr+odd", [one_row("rr+odd", 1)])  # not a name a glob takes as it is: read alone
    run = [(root, t) for t in ("rr_a", "rr_b", "rr+odd", "rr_never_landed")]

    def alone(table: str) -> Landed | BatchError:
        return read_landed(spark, engine.transactions, root, [table])[table]

    def landed(invocation: str, table: str, tables: list = []) -> Landed | None:  # noqa: B006 (never changed)
        return run_reads.landed(spark, engine.invocation(invocation), engine.transactions, root, table, tables)

    got = landed("reads-1", "rr_a", run)
    assert got == alone("rr_a")
    assert got is not None and got.applied == Applied(frozenset({"000001"}), 1)
    assert [m["batch_id"] for m in got.manifests] == ["000002"], "the applied batch's manifest is not read"
    assert run_reads.known(engine.invocation("reads-1"))
    assert landed("reads-1", "rr_a") is None, "taken once"
    with pytest.raises(BatchError, match="000002"):
        landed("reads-1", "rr_b")
    assert landed("reads-1", "rr+odd") == alone("rr+odd")
    assert landed("reads-1", "rr_never_landed") == Landed([], Applied(frozenset(), None))
    assert landed("reads-2", "rr_a") is None, "another invocation"


def test_a_batch_recorded_by_a_recovery_after_the_run_read_the_landing_is_not_applied_again(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped between a table's commit and its record leaves the batch unrecorded. The next
    run reads the landing once at its start, so the batch is staged as pending; another model's
    recovery then records it from the commit. The table's own model applies nothing twice."""
    engine.land("rec_a", [one_row("rec_a", 1)])
    engine.land("rec_b", [one_row("rec_b", 1)])
    monkeypatch.setattr(lock, "unrecorded", {})  # the stopped run's, not the next tests'

    def stop(name: str) -> None:
        if name == "committed":
            raise RuntimeError("stopped")

    monkeypatch.setattr(turn, "reached", stopping("apply", stop))
    with pytest.raises(RuntimeError, match="stopped"):
        engine.apply("rec_a", ROW_COLUMNS, ["id"])
    monkeypatch.setattr(turn, "reached", lambda operation, point: None)
    lock.let_go_all()  # the lock's row says a commit was left unrecorded, as a killed holder's would
    engine.new_process()
    monkeypatch.setattr(lock, "unrecorded", {})

    both = ["rec_a", "rec_b"]
    engine.stage("rec_a", ROW_COLUMNS, ["id"], "recovery-1", run_tables=both)
    engine.stage("rec_b", ROW_COLUMNS, ["id"], "recovery-1")
    assert (
        engine.apply_staged("rec_b", ROW_COLUMNS, ["id"], invocation_id="recovery-1", history_tables=both)["batches"]
        == 1
    )
    assert engine.ids_of("rec_a"), "rec_b's run recorded rec_a's commit"
    table = engine.physical("rec_a")
    outcome = engine.apply_staged("rec_a", ROW_COLUMNS, ["id"], invocation_id="recovery-1", history_tables=both)
    assert outcome["batches"] == 0
    assert engine.physical("rec_a") == table
    assert len(engine.ids_of("rec_a")) == 1


def test_the_next_writer_checks_every_table_only_when_the_last_one_may_have_left_a_commit_unrecorded(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark = engine.project.spark
    monkeypatch.setattr(lock, "unrecorded", {})

    def next_writer_checks() -> bool:
        with lock.holding(spark, engine.writer_lock, 10):
            return lock.must_check_every_table()

    lock.let_go_all()
    assert not next_writer_checks(), "let go with every commit recorded"
    monkeypatch.setattr(lock, "unrecorded", {engine.writer_lock: {engine.target("somewhere")}})
    lock.let_go_all()
    monkeypatch.setattr(lock, "unrecorded", {})
    assert next_writer_checks(), "let go with a commit unrecorded"
    with lock.holding(spark, engine.writer_lock, 10):
        lock.checked_every_table()
        assert not lock.must_check_every_table(), "checked once per hold"


def test_what_the_writer_knows_of_the_transactions_table_is_what_a_scan_of_it_reads(engine: Engine) -> None:
    """Under the writer lock, the last ids and Delta versions come from what this process read
    and recorded since, without a scan: they equal a scan's, table by table."""
    for n in (1, 2):
        for table in ("known_a", "known_b"):
            engine.land(table, [one_row(table, n)])
            engine.apply(table, ROW_COLUMNS, ["id"])
    spark, targets = engine.project.spark, [engine.target("known_a"), engine.target("known_b")]
    with lock.holding(spark, engine.writer_lock, 10):
        ledger.recorded_for(spark, engine.transactions, targets)  # what the next ones are kept from
        engine.land("known_a", [one_row("known_a", 3)])
        engine.apply("known_a", ROW_COLUMNS, ["id"])
        known = ledger._known[engine.transactions]
        assert known.hold == lock.active_hold() and set(targets) <= set(known.tables)
        kept = ledger.recorded_for(spark, engine.transactions, targets)
    scanned = ledger.recorded_for(spark, engine.transactions, targets)  # no lock held: a scan
    assert kept == scanned
    assert kept[targets[0]].history_last_id == max(engine.ids_of("known_a"))


def test_reference_transaction_time() -> None:
    """The oracle itself: a row that leaves and comes back is two physical rows."""
    a, b = {"id": 1, "v": "a"}, {"id": 1, "v": "b"}
    assert physical_rows([[], [a], [a, b], [b], [a, b]]) == ordered([(a, 1, 3), (a, 4, None), (b, 2, None)])


def test_a_run_reads_only_pending_manifests_and_takes_applied_schema_changes_from_their_record(
    engine: Engine,
) -> None:
    """Once a batch is applied, a run no longer reads its folder: the columns its schema changes
    added or dropped come from its transaction's record. Proven by making the applied batch
    unreadable; a table whose transactions were recorded without that record (by an earlier
    version) reads every landed manifest, as before, and so meets it."""
    declared = [Column("id", "bigint"), Column("label", "string"), Column("level", "double")]
    after = [Column("id", "bigint"), Column("level", "double"), Column("unit", "string")]  # no label
    at = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)

    def row(n: int, unit: str) -> dict:
        start = dt.datetime(2024, 1, 2 + n, tzinfo=dt.UTC)
        return {"id": n, "level": n / 2, "unit": unit, START: start, END: TMAX} | {
            "_fivetran_active": True,
            "_fivetran_synced": start,
        }

    changes = [
        SchemaChange("add_column", "unit", at, type="string", default="m"),
        SchemaChange("drop_column", "label", at),
    ]
    engine.land(
        "recorded", [Batch("recorded", "000001", 1, ["id"], after, replace=[row(1, "m")], schema_changes=changes)]
    )
    engine.apply("recorded", declared, ["id"])
    record = engine.project.rows(f"select schema_changes from {engine.transactions} where source_table = 'recorded'")
    assert [json.loads(r["schema_changes"]) for r in record] == [
        [
            {"op": "add_column", "column": "unit", "type": "string"},
            {"op": "drop_column", "column": "label", "type": None},
        ]
    ]

    folder = engine.project.landing / "recorded" / "000001"
    for path in folder.iterdir():
        path.unlink()
    (folder / "manifest.json").write_text('{"format_version": 1, "table": ')
    engine.land("recorded", [Batch("recorded", "000002", 2, ["id"], after, replace=[row(2, "cm")])])
    assert engine.apply("recorded", declared, ["id"])["batches"] == 1
    rows = engine.project.rows(f"select id, label, unit from {engine.target('recorded')} order by id")
    assert [(r["id"], r["label"], r["unit"]) for r in rows] == [(1, None, "m"), (2, None, "cm")]

    engine.project.spark.sql(f"update {engine.transactions} set schema_changes = null where source_table = 'recorded'")
    engine.land("recorded", [Batch("recorded", "000003", 3, ["id"], after, replace=[row(3, "mm")])])
    with pytest.raises(BatchError, match="Batch 000001: manifest.json is not valid JSON"):
        engine.stage("recorded", declared, ["id"])


def test_the_landing_reads_the_same_through_hadoop_and_through_spark_alone(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two ways to list batch folders (folders.py: Hadoop's FileSystem in an embedded session,
    a Spark job over the folders' files through Spark Connect) give the same manifests and errors:
    an empty folder is no batch, a folder with files but no manifest is refused, a table name a
    glob would misread is read as it is, and only the folders asked for are read."""
    spark, root = engine.project.spark, engine.project.landing
    odd = "odd{1},[x]"
    for table in ("fl_plain", odd):
        engine.land(table, [one_row(table, 1), one_row(table, 2)])
    (root / "fl_plain" / "000003").mkdir()  # empty: nothing landed there yet
    (root / "fl_plain" / "000004").mkdir()
    (root / "fl_plain" / "000004" / "replace_0.csv").write_text("id\n")  # a manifest still to come
    (root / odd / "_tmp").mkdir()
    (root / odd / "_tmp" / "part-0").write_text("x")

    def read() -> tuple[dict, dict]:
        listing = folders.Folders(spark, str(root), ["fl_plain", odd, "fl_never_landed"])
        wanted = {"fl_plain": ["000002", "000003", "000004"], odd: ["000001", "_tmp"]}
        read = listing.manifests(wanted)
        return listing.names, {t: {n: _shown(v) for n, v in found.items()} for t, found in read.items()}

    through_hadoop = read()
    monkeypatch.setattr(folders, "hadoop_filesystem", lambda spark: None)
    through_spark = read()
    names, manifests = through_hadoop
    assert names == {
        "fl_plain": ["000001", "000002", "000003", "000004"],
        odd: ["000001", "000002", "_tmp"],
        "fl_never_landed": [],
    }
    assert through_spark[0] == names | {"fl_plain": ["000001", "000002", "000004"]}, "Spark lists folders with files"
    assert manifests == through_spark[1]
    assert manifests["fl_plain"]["000003"] is None
    assert "has files but no manifest.json" in manifests["fl_plain"]["000004"]
    assert "a batch id may hold only" in manifests[odd]["_tmp"]
    assert json.loads(manifests["fl_plain"]["000002"])["batch_id"] == "000002"
    assert json.loads(manifests[odd]["000001"])["table"] == odd
    assert set(manifests["fl_plain"]) == {"000002", "000003", "000004"}


def _shown(found: bytes | BatchError | None) -> str | None:
    return found.decode() if isinstance(found, bytes) else None if found is None else f"error: {found}"
