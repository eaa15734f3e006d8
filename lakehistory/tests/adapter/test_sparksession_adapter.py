"""The `sparksession` adapter plugin: what it adds to dbt-spark, and its errors."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from dbt.adapters.sparksession.impl import SparkSessionAdapter, _seed_cell
from dbt.adapters.sparksession.session import refuse_missing_jars
from dbt_common.exceptions import CompilationError, DbtRuntimeError

from harness import REPO_ROOT, DbtProject
from lakehistory.runtime import jars
from lakehistory.runtime.paths import jar_dir


def lookup(context: dict, strategy: str):
    stub = SimpleNamespace(valid_incremental_strategies=lambda: ["append", "merge"])
    return SparkSessionAdapter.get_incremental_strategy_macro(stub, context, strategy)


def test_strategy_found_in_root_project_first() -> None:
    root, packaged = object(), object()
    context = {"get_incremental_x_sql": root, "some_package": {"get_incremental_x_sql": packaged}}
    assert lookup(context, "x") is root


def test_strategy_found_in_an_installed_package() -> None:
    packaged = object()
    context = {"ref": object(), "some_package": {"get_incremental_x_sql": packaged, "other": object()}}
    assert lookup(context, "x") is packaged


def test_strategy_in_two_packages_is_ambiguous() -> None:
    context = {"a": {"get_incremental_x_sql": object()}, "b": {"get_incremental_x_sql": object()}}
    with pytest.raises(CompilationError, match=r"several packages \(a, b\)"):
        lookup(context, "x")


def test_unknown_strategy_names_itself_and_the_builtins() -> None:
    with pytest.raises(CompilationError, match=r"'nope'.*get_incremental_nope_sql.*append, merge"):
        lookup({}, "nope")


VANISHED = DbtRuntimeError("[TABLE_OR_VIEW_NOT_FOUND] The table or view `_pyspark_1` cannot be found.")


def listing(*outcomes: object) -> SimpleNamespace:
    """An adapter whose listing statement gives `outcomes` in turn (an exception is raised)."""
    pending = list(outcomes)

    def execute_macro(name: str, kwargs: dict) -> object:
        outcome = pending.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return SimpleNamespace(
        LISTING_ATTEMPTS=SparkSessionAdapter.LISTING_ATTEMPTS,
        execute_macro=execute_macro,
        _build_spark_relation_list=lambda row_list, relation_info_func: row_list,
        _get_relation_information=None,
    )


def test_a_relation_dropped_while_the_schema_is_listed_lists_it_again() -> None:
    """dbt-spark returns no relations at all here, so dbt takes every table for gone."""
    adapter = listing(VANISHED, VANISHED, ["history", "transactions"])
    assert SparkSessionAdapter.list_relations_without_caching(adapter, "lake") == ["history", "transactions"]


def test_a_listing_that_keeps_missing_relations_stops_with_an_error() -> None:
    adapter = listing(*[VANISHED] * SparkSessionAdapter.LISTING_ATTEMPTS)
    with pytest.raises(DbtRuntimeError, match=r"Could not list the relations of lake: tables were dropped"):
        SparkSessionAdapter.list_relations_without_caching(adapter, "lake")


def test_a_missing_schema_lists_no_relations_and_other_errors_surface() -> None:
    missing = DbtRuntimeError("[SCHEMA_NOT_FOUND] The schema `lake` cannot be found.")
    assert SparkSessionAdapter.list_relations_without_caching(listing(missing), "lake") == []
    with pytest.raises(DbtRuntimeError, match="metastore is down"):
        SparkSessionAdapter.list_relations_without_caching(listing(DbtRuntimeError("metastore is down")), "lake")


@pytest.mark.parametrize(
    "value, text",
    [(None, None), (True, "true"), (False, "false"), ("O'Brien", "O'Brien"), ("", "")],
)
def test_seed_cells_travel_as_text(value, text) -> None:
    assert _seed_cell(value) == text


def test_profile_loads_exactly_the_cached_jars() -> None:
    """Delta's always (the folder that holds the installed release's alone), Hadoop's S3A connector
    only when the lakehouse or the landing is on S3."""
    profile = (REPO_ROOT / "integration_tests" / "profiles.yml").read_text()
    always, _, on_s3 = profile.partition("{%- if env_var('LAKEHISTORY_S3A'")
    class_path = r"\{\{ jars \}\}([^:\s{]+)"  # the driver's class path: entries joined by ':'
    assert "spark.driver.extraClassPath:" in always
    assert re.findall(class_path, always) == [f"{jars.DELTA_FOLDER}/*"]  # the JVM's wildcard: every jar in it
    assert sorted(p.name for p in (jar_dir() / jars.DELTA_FOLDER).iterdir()) == sorted(jars.required())
    on_s3 = on_s3.partition("{%- endif %}")[0]
    assert sorted(re.findall(class_path, on_s3)) == sorted(jars.OBJECT_STORE)


def test_a_class_path_entry_that_is_not_there_is_named_before_the_session_starts(tmp_path: Path) -> None:
    """The JVM would skip it without a word: a profile on S3 whose S3A jars were never fetched
    then fails on the first s3a:// path, naming a class."""
    (tmp_path / "delta").mkdir()
    (tmp_path / "delta" / "a.jar").write_bytes(b"")
    (tmp_path / "b.jar").write_bytes(b"")
    refuse_missing_jars(f"{tmp_path}/delta/*:{tmp_path}/b.jar")  # a wildcard that matches, a file there
    absent = tmp_path / "org.apache.hadoop_hadoop-aws-3.5.0.jar"
    with pytest.raises(DbtRuntimeError) as refused:
        refuse_missing_jars(f"{tmp_path}/delta/*:{absent}:{tmp_path}/empty/*")
    assert f"{absent}, {tmp_path}/empty/*" in str(refused.value)
    assert "python -m lakehistory.runtime.jars ensure --object-store" in str(refused.value)


def add_model(project: DbtProject, name: str, body: str) -> None:
    path = project.project_dir / "models" / name
    path.write_text(textwrap.dedent(body))


def test_seed_value_that_does_not_cast_names_column_and_row(dbt_project: DbtProject) -> None:
    seed = dbt_project.project_dir / "seeds" / "platform_variables_seed.csv"
    lines = seed.read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0] + ",tenth"  # data row 2: PCPN's precision
    seed.write_text("\n".join(lines) + "\n")
    project_file = dbt_project.project_dir / "dbt_project.yml"  # the seed's YAML already has its properties
    text, anchor = project_file.read_text(), "seeds:\n  lakehistory_integration_tests:\n"
    assert anchor in text, "the demo project configures its seeds here"
    project_file.write_text(
        text.replace(anchor, anchor + "    platform_variables_seed:\n      +column_types: {precision: double}\n")
    )
    error = dbt_project.run_fails("seed")
    assert "'precision'" in error and "'tenth'" in error and "data row 2" in error, error
    tables = [r["tableName"] for r in dbt_project.rows("show tables in {schema}")]
    assert "platform_variables_seed" not in tables or not dbt_project.rows(
        "select * from {schema}.platform_variables_seed"
    ), "a seed that fails must not leave rows behind"


def test_unknown_custom_strategy_is_a_clear_error(dbt_project: DbtProject) -> None:
    add_model(
        dbt_project,
        "odd_strategy.sql",
        """
        {{ config(materialized='incremental', incremental_strategy='no_such_strategy') }}
        select 1 as id
    """,
    )
    error = dbt_project.run_fails("run", "--select", "odd_strategy")
    assert "no_such_strategy" in error and "get_incremental_no_such_strategy_sql" in error, error
    assert "Compilation Error" in error, "an unknown strategy is a compilation error, as in dbt itself"


def test_python_model_error_names_the_model(dbt_project: DbtProject) -> None:
    add_model(
        dbt_project,
        "broken_python.py",
        """
        def model(dbt, session):
            stations = session.range(0)
            if stations.isEmpty():
                raise ValueError("station list is empty")
            return stations
    """,
    )
    error = dbt_project.run_fails("run", "--select", "broken_python")
    assert "broken_python" in error and "station list is empty" in error, error


def test_python_model_runs_in_dbt_session_and_sees_its_temp_views(dbt_project: DbtProject, tmp_path: Path) -> None:
    add_model(
        dbt_project,
        "session_check.py",
        """
        def model(dbt, session):
            # The SQL session's catalog, conf and temp views are the Python model's too.
            session.sql("create or replace temporary view session_probe as select 42 as answer")
            assert session.conf.get("spark.sql.session.timeZone") == "UTC"
            return session.table("session_probe")
    """,
    )
    dbt_project.run_ok("run", "--select", "session_check")
    assert dbt_project.rows("select * from {schema}.session_check") == [{"answer": 42}]
