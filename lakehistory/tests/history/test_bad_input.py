"""Bad input: each case stops the run with an error that names the batch and the file, row or
column at fault, and leaves every table exactly as it was."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import json
import shutil
from pathlib import Path

import pytest
import zstandard
from history_case import HistoryCase

from harness import DbtProject, copy_project, unique_schema
from lakehistory.landing.batch import TMAX, Batch, Column

COLS = [Column("id", "bigint"), Column("name", "string"), Column("amount", "bigint"), Column("seen", "timestamp")]
HEADER = "id,name,amount,seen,_fivetran_start,_fivetran_end,_fivetran_active,_fivetran_synced"
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def good_row(id_: int, start: dt.datetime) -> dict:
    return {
        "id": id_,
        "name": f"n{id_}",
        "amount": id_ * 10,
        "seen": start,
        "_fivetran_start": start,
        "_fivetran_end": TMAX,
        "_fivetran_active": True,
        "_fivetran_synced": start,
    }


@pytest.fixture(scope="module")
def applied(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> HistoryCase:
    """A table with one applied batch, the state every bad batch must leave untouched."""
    project = DbtProject(copy_project(tmp_path_factory.mktemp("bad_input")), unique_schema("bad_input"))
    case = HistoryCase(project, "ledger", COLS, ["id"])
    case.land(
        Batch(
            table="ledger",
            batch_id="000001",
            sequence=1,
            key=["id"],
            columns=COLS,
            replace=[good_row(1, T0), good_row(2, T0)],
        )
    )
    case.run()
    assert len(case.fivetran_rows()) == 2
    return case


def land_raw(
    case: HistoryCase,
    batch_id: str,
    files: dict[str, bytes | str],
    manifest: dict | bool | None = None,
    sequence: int = 2,
    truncate_manifest: bool = False,
) -> Path:
    folder = case.project.landing / case.name / batch_id
    folder.mkdir(parents=True)
    entries = []
    for name, content in files.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        kind = name.split("_")[0]
        entries.append({"kind": kind, "path": name})
    if manifest is not False:
        body = {
            "format_version": 1,
            "table": case.name,
            "batch_id": batch_id,
            "sequence": sequence,
            "key": ["id"],
            "null_string": "\\N",
            "unmodified_string": "~~",
            "author": "tester",
            "app_id": "tests",
            "files": entries,
            **(manifest or {}),
        }
        text = json.dumps(body)
        (folder / "manifest.json").write_text(text[: len(text) // 2] if truncate_manifest else text)
    return folder


ROW = "3,three,30,2024-05-02T00:00:00Z,2024-05-02T00:00:00Z,9999-12-31T23:59:59.999Z,true,2024-05-02T00:00:00Z"
AT = "2024-05-02T00:00:00Z"
BAD_START = "4,four,40,2024-05-02T00:00:00Z,yesterday,9999-12-31T23:59:59.999Z,true,2024-05-02T00:00:00Z"

CASES = {
    "missing_key_column": (
        {"replace_0.csv": HEADER.replace("id,", "") + "\n" + ROW.split(",", 1)[1] + "\n"},
        None,
        ["000002", "replace_0.csv", "lacks column(s) id"],
    ),
    "null_key": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('3,three', chr(92) + 'N,three')}\n"},
        None,
        ["000002", "replace_0.csv", "data row 1", "key column id is NULL"],
    ),
    "unparseable_timestamp": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n{BAD_START}\n"},
        None,
        ["000002", "replace_0.csv", "data row 2", "_fivetran_start", "yesterday"],
    ),
    "unparseable_number": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace(',30,', ',3O,')}\n"},
        None,
        ["000002", "replace_0.csv", "data row 1", "column amount", "3O"],
    ),
    "fractional_integer": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace(',30,', ',30.5,')}\n"},
        None,
        ["000002", "column amount", "30.5"],
    ),
    "duplicate_key_and_start": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n", "update_0.csv": f"{HEADER}\n{ROW.replace('three', '~~')}\n"},
        None,
        ["000002", "id=3", "2024-05-02", "replace_0.csv", "update_0.csv"],
    ),
    "unknown_column": (
        {"replace_0.csv": f"{HEADER},colour\n{ROW},red\n"},
        None,
        ["000002", "replace_0.csv", "unknown column(s) colour"],
    ),
    "missing_manifest": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        False,
        ["000002", "no manifest.json"],
    ),
    "unmodified_token_in_replace_file": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('three', '~~')}\n"},
        None,
        ["000002", "replace_0.csv", "data row 1", "column name holds unmodified_string in a replace file"],
    ),
    "manifest_for_another_table": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"table": "ledgers"},
        ["000002", "'ledgers'", "ledger"],
    ),
    "batch_older_than_applied": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"sequence": 1},
        ["000002", "sequence 1", "last applied sequence 1"],
    ),
    "schema_change_default_of_the_wrong_type": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"schema_changes": [{"op": "add_column", "column": "colour", "type": "bigint", "default": "blue", "at": AT}]},
        ["000002", "schema_changes[1] (add_column colour)", "bigint expected", "blue"],
    ),
    "schema_change_unparseable_instant": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"schema_changes": [{"op": "drop_column", "column": "name", "at": "yesterday"}]},
        ["000002", "schema_changes[1] (drop_column name)", "yesterday"],
    ),
    "schema_change_of_a_key_column": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"schema_changes": [{"op": "drop_column", "column": "id", "at": AT}]},
        ["000002", "schema_changes[1]", "only a data column"],
    ),
    "schema_change_retypes_a_column": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"schema_changes": [{"op": "add_column", "column": "amount", "type": "string", "at": AT}]},
        ["000002", "adds amount as string", "bigint"],
    ),
    "schema_change_unknown_op": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"schema_changes": [{"op": "rename_column", "column": "name", "at": AT}]},
        ["000002", "schema_changes[1]", "rename_column"],
    ),
    "duplicate_header_column": (
        {"replace_0.csv": f"{HEADER},name\n{ROW},again\n"},
        None,
        ["000002", "replace_0.csv", "names column(s) name more than once"],
    ),
    "bad_cell_in_the_second_file_of_two": (
        # each file numbers its own data rows, however the run reads them together
        {
            "replace_0.csv": f"{HEADER}\n{ROW}\n",
            "replace_1.csv": f"{HEADER}\n{ROW.replace('3,three', '5,five')}\n{BAD_START}\n",
        },
        None,
        ["000002", "replace_1.csv, data row 2", "_fivetran_start", "yesterday"],
    ),
    "manifest_not_json": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        "truncated",
        ["000002", "manifest.json is not valid JSON", "line 1, column"],
    ),
    "manifest_field_of_the_wrong_type": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"sequence": "two"},
        ["000002", "manifest.json field 'sequence' is \"two\"; expected an integer"],
    ),
    "manifest_of_an_unknown_format_version": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n"},
        {"format_version": 99},
        ["000002", "format_version 99", "reads format 1"],
    ),
    "row_with_too_many_fields": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n{ROW},extra\n"},
        None,
        ["000002", "replace_0.csv, data row 2", "do not line up with the header"],
    ),
    "row_with_too_few_fields": (
        {"replace_0.csv": f"{HEADER}\n{ROW}\n{ROW.rsplit(',', 2)[0]}\n"},
        None,
        ["000002", "replace_0.csv, data row 2", "do not line up with the header"],
    ),
    "random_bytes_in_a_gzip_file": (
        {"replace_0.csv.gz": bytes(range(256)) * 4},
        None,
        ["000002", "replace_0.csv.gz", "not a gzip file"],
    ),
    "start_after_end": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('9999-12-31T23:59:59.999Z,true', '2024-05-01T00:00:00Z,false')}\n"},
        None,
        ["000002", "data row 1", "_fivetran_start 2024-05-02T00:00:00.000Z is after _fivetran_end 2024-05-01"],
    ),
    "active_row_without_the_open_end": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('9999-12-31T23:59:59.999Z', '2024-06-01T00:00:00Z')}\n"},
        None,
        ["000002", "data row 1", "an active row (_fivetran_active true) must have _fivetran_end 9999-12-31"],
    ),
    "inactive_row_with_the_open_end": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('.999Z,true', '.999Z,false')}\n"},
        None,
        ["000002", "data row 1", "an inactive row (_fivetran_active false) cannot have _fivetran_end 9999-12-31"],
    ),
    "text_that_is_not_utf8": (
        {"replace_0.csv": f"{HEADER}\n{ROW.replace('three', 'café')}\n".encode("latin-1")},
        None,
        ["000002", "replace_0.csv, data row 1", "column name: the text is not valid UTF-8"],
    ),
    "truncated_gzip_file": (
        {"replace_0.csv.gz": gzip.compress((f"{HEADER}\n" + f"{ROW}\n" * 2000).encode())[:300]},
        None,
        ["000002", "replace_0.csv.gz"],
    ),
    "random_bytes_in_a_zstd_file": (
        {"replace_0.csv.zst": bytes(range(256)) * 4},
        None,
        ["000002", "file replace_0.csv.zst cannot be read", "Unknown frame descriptor"],
    ),
    "truncated_zstd_file": (
        {"replace_0.csv.zst": zstandard.ZstdCompressor().compress((f"{HEADER}\n" + f"{ROW}\n" * 2000).encode())[:60]},
        None,
        ["000002", "file replace_0.csv.zst cannot be read", "Truncated source"],
    ),
    "quote_never_closed": (
        {"replace_0.csv": f'{HEADER}\n{ROW}\n4,"four,40,{ROW.split(",", 3)[3]}\n'},
        None,
        ["000002", "replace_0.csv, data row 2", "a quote never closed"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_batch_is_refused_and_nothing_changes(applied: HistoryCase, name: str) -> None:
    files, manifest, expected = CASES[name]
    before_rows, before_txns = applied.physical_rows(), applied.transactions()
    truncated = manifest == "truncated"
    folder = land_raw(applied, "000002", files, None if truncated else manifest, truncate_manifest=truncated)
    try:
        error = applied.run_fails()
    finally:
        shutil.rmtree(folder)
    for fragment in expected:
        assert fragment in error, f"{fragment!r} missing from the error:\n{error}"
    assert applied.physical_rows() == before_rows
    assert applied.transactions() == before_txns


# A manifest is untrusted: each path names a file that exists and that a reader without the check
# would take (the applied batch's own file, or a file beside the landing), yet is refused.
ESCAPES = {
    "parent_folder": "../000001/replace_0.csv",
    "beside_the_landing": "../../../outside_0.csv",
    "absolute_path": "{outside}",
    "url_scheme": "file://{outside}",
    "subfolder": "sub/replace_0.csv",
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_file_outside_the_batch_folder_is_refused(applied: HistoryCase, name: str) -> None:
    outside = applied.project.project_dir / "outside_0.csv"
    outside.write_text(f"{HEADER}\n{ROW}\n")
    path = ESCAPES[name].format(outside=outside)
    before_rows, before_txns = applied.physical_rows(), applied.transactions()
    folder = land_raw(applied, "000002", {}, {"files": [{"kind": "replace", "path": path}]})
    if name == "subfolder":
        (folder / "sub").mkdir()
        (folder / "sub" / "replace_0.csv").write_text(f"{HEADER}\n{ROW}\n")
    try:
        error = applied.run_fails()
    finally:
        shutil.rmtree(folder)
    assert "000002" in error and repr(path) in error and "inside the batch folder" in error, error
    assert applied.physical_rows() == before_rows
    assert applied.transactions() == before_txns


def test_file_name_with_glob_characters_is_read_as_it_is(applied: HistoryCase) -> None:
    """`replace[0].csv` is that file, not a pattern (which would match `replace0.csv`)."""
    case = HistoryCase(applied.project, "globbed", COLS, ["id"])
    land_raw(
        case,
        "000001",
        {"replace[0].csv": f"{HEADER}\n{ROW}\n", "replace0.csv": f"{HEADER}\n{ROW.replace('3,three', '9,decoy')}\n"},
        {"table": "globbed", "files": [{"kind": "replace", "path": "replace[0].csv"}]},
        sequence=1,
    )
    case.run()
    assert [(r["id"], r["name"]) for r in case.fivetran_rows()] == [(3, "three")]


def test_duplicate_start_clashing_with_the_table_is_refused(applied: HistoryCase) -> None:
    """Rule 9 inserts as sent; a version repeating a stored (key, start) with no earliest start
    for the key would give the table two rows with one primary key."""
    before = applied.physical_rows()
    folder = land_raw(
        applied,
        "000002",
        {
            "replace_0.csv": (
                f"{HEADER}\n1,again,1,2024-05-01T00:00:00Z,2024-05-01T00:00:00Z,9999-12-31T23:59:59.999Z,true,2024-05-03T00:00:00Z\n"
            )
        },
    )
    try:
        error = applied.run_fails()
    finally:
        shutil.rmtree(folder)
    assert "000002" in error and "already holds" in error, error
    assert applied.physical_rows() == before


def test_a_deleted_column_the_model_does_not_configure_is_refused_not_ignored(applied: HistoryCase) -> None:
    """Rules 8 and 11 mark closed rows in the column a batch names; a model that configures no
    deleted_column refuses such a batch (naming batch and column) after applying the ones before
    it, and applies it once the model configures the column."""
    columns = [*COLS, Column("deleted", "boolean")]
    case = HistoryCase(applied.project, "flagged", columns, ["id"])

    def flagged(n: int, **rows: list[dict]) -> Batch:
        return Batch(table="flagged", batch_id=f"{n:06d}", sequence=n, key=["id"], columns=columns, **rows)

    later = T0 + dt.timedelta(days=1)
    case.land(flagged(1, replace=[dict(good_row(1, T0), deleted=False), dict(good_row(2, T0), deleted=False)]))
    case.land(dataclasses.replace(flagged(2, delete=[{"id": 1, "_fivetran_end": later}]), deleted_column="deleted"))
    case.land(flagged(3, replace=[dict(good_row(3, later), deleted=False)]))
    error = case.run_fails()
    for fragment in ("batch 000002", "names deleted as its deleted column", "deleted_column='deleted'"):
        assert fragment in error, f"{fragment!r} missing from the error:\n{error}"
    assert [t["batch_id"] for t in case.transactions()] == ["000001"]
    assert [(r["id"], r["_fivetran_active"]) for r in case.physical_rows()] == [(1, True), (2, True)]

    configured = HistoryCase(applied.project, "flagged", columns, ["id"], deleted_column="deleted")
    configured.run()
    assert [t["batch_id"] for t in configured.transactions()] == ["000001", "000002", "000003"]
    assert {(r["id"], r["_fivetran_active"], r["deleted"]) for r in configured.fivetran_rows()} == {
        (1, False, True),
        (2, True, False),
        (3, True, False),
    }
