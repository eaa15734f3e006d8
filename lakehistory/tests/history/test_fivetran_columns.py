"""Every column a connector sends is kept, whatever its name: `_fivetran_deleted` as the deleted
column, `_fivetran_id` as the only key, any other `_fivetran_*` column as data, through the
history table, the Fivetran view, `_hx`, events, states and the main table. Only the names the
product gives columns of its own are refused, with an error naming the column and the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from history_case import HistoryCase, T, naive, normalize, version
from hx_case import add_derived

from harness import DbtProject, copy_project, unique_schema
from lakehistory.landing.batch import ONE_MS, Batch, Column, SchemaChange
from oracle.fivetran import apply_batch

# A Fivetran destination table of a source without a primary key: Fivetran's key, its soft-delete
# flag and a connector's own column, next to the source's.
ACCOUNT = [
    Column("_fivetran_id", "string"),
    Column("name", "string"),
    Column("_fivetran_deleted", "boolean"),
    Column("_fivetran_index", "bigint"),
]
KEY = ["_fivetran_id"]


@pytest.fixture(scope="module")
def project(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> DbtProject:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("fivetran_columns")), unique_schema("ftcols"))
    project.landing.mkdir()
    return project


def account_batch(table: str, n: int, versions=(), deletes=(), columns=ACCOUNT, **changes) -> Batch:
    firsts: dict = {}
    for v in versions:
        firsts[v["_fivetran_id"]] = min(firsts.get(v["_fivetran_id"], v["_fivetran_start"]), v["_fivetran_start"])
    return Batch(
        table=table,
        batch_id=f"{n:06d}",
        sequence=n,
        key=KEY,
        columns=columns,
        replace=list(versions),
        delete=[{"_fivetran_id": k, "_fivetran_end": e} for k, e in deletes],
        earliest=[{"_fivetran_id": k, "_fivetran_start": s} for k, s in firsts.items()],
        deleted_column="_fivetran_deleted",
        author="alice",
        **changes,
    )


def rows(project: DbtProject, table: str, order: str) -> list[dict]:
    return [normalize(r) for r in project.rows(f"select * from {{schema}}.`{table}` order by {order}")]


# `make test` lands the published form; the seed's form (a column of the batch) runs in `make test-slow`.
@pytest.mark.parametrize(
    "form", [pytest.param("file", id="published_form"), pytest.param("column", id="seed_form", marks=pytest.mark.slow)]
)
def test_fivetran_columns_are_data_in_every_table_built_from_the_batches(project: DbtProject, form: str) -> None:
    """The README's setup: `_fivetran_deleted` declared and named by the model config and the
    manifests; two batches, a delete; then a schema change adds and drops `_fivetran_*` columns."""
    table = f"account_{form}"
    case = HistoryCase(project, table, ACCOUNT, KEY, deleted_column="_fivetran_deleted")
    add_derived(project, table, KEY)
    a = dict(_fivetran_deleted=False)
    first = account_batch(
        table,
        1,
        [
            version(T(1), T(2) - ONE_MS, _fivetran_id="k1", name="one", _fivetran_index=1, **a),
            version(T(2), _fivetran_id="k1", name="one'", _fivetran_index=2, **a),
            version(T(1), _fivetran_id="k2", name="two", _fivetran_index=3, **a),
        ],
    )
    second = account_batch(
        table, 2, [version(T(3), _fivetran_id="k1", name="uno", _fivetran_index=4, **a)], deletes=[("k2", T(4))]
    )
    reference: list = []
    for b in (first, second):
        case.land(b, earliest_form=form)
        case.project.run_ok("run", "--select", f"{table}+")
        reference = apply_batch(reference, b)
        assert case.fivetran_rows() == case.expected(reference), f"after batch {b.batch_id}"
    # the delete closed k2 and marked it deleted (rule 11); the update closed k1's version (rule 8)
    closed = {(r["_fivetran_id"], r["name"]): r["_fivetran_deleted"] for r in case.fivetran_rows()}
    assert closed == {("k1", "one"): False, ("k1", "one'"): True, ("k1", "uno"): False, ("k2", "two"): True}

    # The Fivetran view and the main table carry every column of the source.
    fivetran_view = project.compile_inline(f"select * from {{{{ lakehistory.current(ref('{table}')) }}}}")
    current = [normalize(r.asDict()) for r in project.spark.sql(fivetran_view).collect()]
    assert sorted((r["_fivetran_id"], r["_fivetran_index"]) for r in current if r["_fivetran_active"]) == [("k1", 4)]
    main = rows(project, f"{table}_main", "_fivetran_id")
    assert [(r["_fivetran_id"], r["name"], r["_fivetran_deleted"], r["_fivetran_index"]) for r in main] == [
        ("k1", "uno", False, 4)
    ]
    hx = rows(project, f"{table}_hx", f"{table}_hx_id")
    assert [(r["_fivetran_id"], r["_fivetran_index"], r["deleted"]) for r in hx][-1] == ("k2", 3, True)
    events = rows(project, f"{table}_events", "_hist_trans_id, _fivetran_id, _hist_valid_time, _hist_event")
    assert {"_fivetran_deleted", "_fivetran_index"} <= set(events[0])
    assert [(e["_fivetran_id"], e["_hist_event"], e["_fivetran_index"]) for e in events if e["_hist_trans_id"] > 1][
        -1
    ] == ("k2", 2, 3)
    states = rows(project, f"{table}_states", "txn_id, _fivetran_id")
    assert [(s["_fivetran_id"], s["action"], s["_fivetran_index"]) for s in states][-2:] == [
        ("k1", "UPDATE", 4),
        ("k2", "DELETE", 3),
    ]

    # A history-mode schema change adds `_fivetran_region` and drops `_fivetran_index` at T(5).
    changes = [
        SchemaChange("add_column", "_fivetran_region", T(5), type="string", default="eu"),
        SchemaChange("drop_column", "_fivetran_index", T(5)),
    ]
    widened = [*ACCOUNT, Column("_fivetran_region", "string")]
    third = account_batch(table, 3, columns=widened, schema_changes=changes)
    case.land(third, earliest_form=form)
    case.project.run_ok("run", "--select", f"{table}+")
    reference = apply_batch(reference, third)
    assert case.fivetran_rows() == case.expected(reference, widened)
    main = rows(project, f"{table}_main", "_fivetran_id")
    assert [(r["_fivetran_id"], r["_fivetran_index"], r["_fivetran_region"]) for r in main] == [("k1", None, "eu")]
    txn = case.transactions()[-1]["txn_id"]
    for model in ("hx", "events", "states"):
        got = project.rows(f"select * from {{schema}}.`{table}_{model}`")
        assert "_fivetran_region" in got[0], model
        assert any(r.get("_fivetran_region") == "eu" for r in got), model
    states = rows(project, f"{table}_states", "txn_id, _fivetran_id")
    assert [(s["_fivetran_id"], s["_fivetran_index"], s["_fivetran_region"]) for s in states if s["txn_id"] == txn] == [
        ("k1", None, "eu")
    ]


def test_a_source_column_with_a_reserved_name_is_refused_naming_it(project: DbtProject) -> None:
    """Staging's own and the protocol's names are refused where the source declares them; a
    history table's transaction-time names where the model's rows bring them, and there a rename
    in the model's select lets the column in."""
    staged = HistoryCase(project, "ledger", [Column("id", "bigint"), Column("_lh_kind", "string")], ["id"])
    staged.land(batch_of("ledger", staged.columns, _lh_kind="x"))
    error = staged.run_fails()
    assert "ledger: column _lh_kind has a name lakehistory gives a column of its own" in error, error
    assert not staged.exists()

    protocol = HistoryCase(project, "journal", [Column("id", "bigint"), Column("_FIVETRAN_SYNCED", "string")], ["id"])
    error = protocol.run_fails()
    assert "journal: column _FIVETRAN_SYNCED has a name lakehistory gives a column of its own" in error, error

    columns = [Column("id", "bigint"), Column("valid_to", "timestamp")]
    period = HistoryCase(project, "period", columns, ["id"])
    period.land(batch_of("period", columns, valid_to=T(9)))
    error = period.run_fails()
    assert ".period: column valid_to has a name lakehistory gives a column of its own" in error, error
    assert "Rename it in the model's select: `select * except (valid_to), valid_to as" in error, error
    assert not period.exists() and period.transactions() == []

    model = project.project_dir / "models" / "under_test" / "period.sql"
    model.write_text(
        model.read_text().replace("select * from", "select * except (valid_to), valid_to as source_valid_to from")
    )
    period.run()
    assert [(r["id"], r["source_valid_to"]) for r in period.physical_rows()] == [(1, naive(T(9)))]


def test_a_schema_change_may_not_add_a_reserved_name(project: DbtProject) -> None:
    columns = [Column("id", "bigint"), Column("name", "string")]
    case = HistoryCase(project, "roster", columns, ["id"])
    case.land(batch_of("roster", columns, name="a"))
    case.run()
    before = case.physical_rows()
    adds = [SchemaChange("add_column", "valid_from", T(5), type="bigint")]
    case.land(dataclasses.replace(batch_of("roster", columns, n=2, name="b"), schema_changes=adds))
    error = case.run_fails()
    assert "Batch 000002" in error and "valid_from is a name lakehistory gives a column of its own" in error, error
    assert case.physical_rows() == before and len(case.transactions()) == 1


def batch_of(table: str, columns, n: int = 1, **values) -> Batch:
    row = version(T(n), id=1, **values)
    return Batch(table, f"{n:06d}", n, ["id"], columns, replace=[row], earliest=[{"id": 1, "_fivetran_start": T(n)}])
