"""The platform, proven by two `dbt build`s of the demo's platform models (the seed and everything
built on it) on embedded Spark.

The first build loads the seed and creates every model; then the seed changes (one variable's
precision changes, one variable is deleted, one is added) and the second build must carry the
change through the incremental models and the snapshot.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from harness import DbtProject, copy_project, stored_tables, unique_schema

SEED = "seeds/platform_variables_seed.csv"


def read_seed(project: DbtProject) -> list[dict]:
    with open(project.project_dir / SEED, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write_seed(project: DbtProject, rows: list[dict]) -> None:
    with open(project.project_dir / SEED, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def builds(lakehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    project = DbtProject(copy_project(tmp_path_factory.mktemp("platform")), unique_schema("platform"))
    before = read_seed(project)
    platform = ("--select", "platform_variables_seed+")  # the seed, the models and snapshot on it, their tests
    project.run_ok("build", *platform)
    first = {
        name: project.rows(f"select * from {{schema}}.{name}")
        for name in ("platform_variables_seed", "platform_variable_catalog", "platform_variable_first_seen")
    }
    after = [dict(row) for row in before if row["vars_name"] != "WDIR"]  # WDIR deleted at the source
    for row in after:
        if row["vars_name"] == "ATM_TEMP":
            row["precision"] = "0.5"  # changed
    after.append(dict(before[0], vars_id="5", vars_name="SNOW_DEPTH", unit="cm", precision="1"))  # added
    write_seed(project, after)
    project.run_ok("build", *platform)
    return {"project": project, "before": before, "after": after, "first": first}


def by_id(rows: list[dict]) -> dict:
    return {row["vars_id"]: row for row in rows}


def test_seed_keeps_empty_cells_null_and_quotes_as_data(builds: dict) -> None:
    rows = by_id(builds["first"]["platform_variables_seed"])
    assert len(rows) == len(builds["before"])
    assert rows[2]["precision"] is None, "an empty seed cell must load as NULL, not the string 'None'"
    assert rows[3]["display_name"] == "Wind direction (O'Brien vane)"
    assert rows[4]["display_name"] == "Relative humidity, 2 m"


def test_sql_model_types_and_renames_the_seed(builds: dict) -> None:
    project = builds["project"]
    rows = by_id(project.rows("select * from {schema}.platform_variables"))
    expected = by_id([dict(row, vars_id=int(row["vars_id"])) for row in builds["after"]])
    assert rows.keys() == expected.keys()
    for vars_id, row in rows.items():
        source = expected[vars_id]
        assert row["vars_name"] == source["vars_name"]
        assert row["precision"] == (float(source["precision"]) if source["precision"] else None)
        assert row["has_precision"] == bool(source["precision"])


def test_python_table_model_counts_variables_per_unit(builds: dict) -> None:
    project = builds["project"]
    counts = {row["unit"]: row["variable_count"] for row in project.rows("select * from {schema}.platform_unit_counts")}
    assert counts == dict(Counter(row["unit"] for row in builds["after"]))


def test_python_incremental_model_merges_only_what_changed(builds: dict) -> None:
    project = builds["project"]
    first = by_id(builds["first"]["platform_variable_catalog"])
    now = by_id(project.rows("select * from {schema}.platform_variable_catalog"))
    assert now[1]["precision"] == 0.5 and first[1]["precision"] == 0.1
    assert now[1]["definition_hash"] != first[1]["definition_hash"]
    assert now[2] == first[2], "an unchanged variable must be left as it was"
    assert 5 in now and 3 in now, "merge adds new keys and keeps keys gone from the source"
    history = project.rows("describe history {schema}.platform_variable_catalog")
    merge = [h for h in history if h["operation"] == "MERGE"]
    assert len(merge) == 1 and merge[0]["operationMetrics"]["numSourceRows"] == "2", (
        "the incremental run should merge only the changed and the new variable"
    )


def test_custom_strategy_inserts_new_keys_only(builds: dict) -> None:
    project = builds["project"]
    first = by_id(builds["first"]["platform_variable_first_seen"])
    now = by_id(project.rows("select * from {schema}.platform_variable_first_seen"))
    assert set(first) == {1, 2, 3, 4}
    assert set(now) == {1, 2, 3, 4, 5}
    assert now[1]["precision"] == 0.1, "insert_new must not overwrite a known key"


def test_snapshot_records_each_change_with_contiguous_validity(builds: dict) -> None:
    project = builds["project"]
    rows = project.rows(
        "select vars_id, precision, dbt_valid_from, dbt_valid_to"
        " from {schema}.platform_variables_snapshot order by vars_id, dbt_valid_from"
    )
    versions = {}
    for row in rows:
        versions.setdefault(row["vars_id"], []).append(row)
    old, new = versions[1]
    assert (old["precision"], new["precision"]) == (0.1, 0.5)
    assert old["dbt_valid_to"] == new["dbt_valid_from"] and new["dbt_valid_to"] is None
    assert len(versions[2]) == 1 and versions[2][0]["dbt_valid_to"] is None
    (gone,) = versions[3]
    assert gone["dbt_valid_to"] == new["dbt_valid_from"], "a key gone from the source is closed by the second run"
    assert len(versions[5]) == 1 and versions[5][0]["dbt_valid_from"] == new["dbt_valid_from"]


def test_every_table_is_delta(builds: dict) -> None:
    project = builds["project"]
    tables = stored_tables(project.spark, project.schema)
    assert set(tables) >= {
        "platform_variables_seed",
        "platform_variables",
        "platform_unit_counts",
        "platform_variable_catalog",
        "platform_variable_first_seen",
        "platform_variables_snapshot",
    }
    for table in tables:
        detail = project.rows(f"describe detail {{schema}}.{table}")[0]
        assert detail["format"] == "delta", f"{table} is {detail['format']}, not delta"
