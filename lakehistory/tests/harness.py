"""Runs the dbt project in-process, as a user would, against a throwaway lakehouse.

One Spark session per test process: dbt's session method starts it on the first invocation
and every later invocation (and every assertion) reuses it. Each test works on its own copy of
the demo project (`integration_tests/`, installing the package from this checkout) and its own
schema, so tests never see each other's tables.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dbt.cli.main import dbtRunner, dbtRunnerResult

from lakehistory_tools.generator import GeneratorConfig
from lakehistory_tools.project import DEMO_PARTS, copy_demo_project

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILES_DIR = REPO_ROOT / "integration_tests"

# The JIT of the tests' JVMs (LAKEHISTORY_JAVA_OPTIONS, profiles.yml): a test process runs thousands
# of different small queries, so C2 compiles a method after three times Java's call counts
# (docs/decisions/0002).
JIT_FOR_SHORT_QUERIES = (
    "-XX:Tier4InvocationThreshold=15000 -XX:Tier4MinInvocationThreshold=6000"
    " -XX:Tier4CompileThreshold=30000 -XX:Tier4BackEdgeThreshold=120000"
)
# The garbage collector of the test JVMs: Java's throughput collector, not G1. The heap holds a few
# queries' short-lived objects at a time, so G1's concurrent marking buys nothing (docs/decisions/0002).
GC_FOR_SHORT_QUERIES = "-XX:+UseParallelGC"
# Both, as every test JVM takes them: the embedded one (conftest.py) and the cluster's (Connect test).
JVM_FOR_SHORT_QUERIES = f"{JIT_FOR_SHORT_QUERIES} {GC_FOR_SHORT_QUERIES}"

# The demo the `demo` fixture (conftest.py) builds: small, two days (a first build, then an
# incremental one), every table with batches or extracts each day.
DEMO_CONFIG = GeneratorConfig(scale=3, syncs=2, seed=11)
DEMO_EXTRACTS = ("meta_history", "meta_vars")


def examples(ci: int, thorough: int) -> int:
    """How many examples a property test that runs Spark per step draws: `ci` in `make test`,
    `thorough` in `make test-slow` (LAKEHISTORY_THOROUGH=1), which has the time for more."""
    return thorough if os.environ.get("LAKEHISTORY_THOROUGH") == "1" else ci


def copy_project(destination: Path, parts: Iterable[str] = DEMO_PARTS) -> Path:
    """A copy of the demo project with the package installed (`dbt deps`: a link to this checkout)."""
    copy_demo_project(REPO_ROOT, destination, parts)
    result = dbtRunner().invoke(["deps", "--project-dir", str(destination), "--profiles-dir", str(PROFILES_DIR)])
    if not result.success:
        raise AssertionError(f"dbt deps failed in {destination}: {describe_failure(result)}")
    return destination


def unique_schema(label: str) -> str:
    return f"t_{re.sub(r'[^a-z0-9]+', '_', label.lower())[:40]}_{uuid.uuid4().hex[:8]}"


class DbtProject:
    """A dbt project directory bound to one schema of the test lakehouse."""

    def __init__(self, project_dir: Path, schema: str, target: str = "local", landing_root: str | None = None) -> None:
        self.project_dir = Path(project_dir)
        self.schema = schema
        self.target = target
        self.landing = self.project_dir / "landing"  # where this project's batches are written
        # where dbt reads them: the same folder, or the URI they are copied to (an s3a:// prefix)
        self.landing_root = landing_root or str(self.landing)

    def _options(self) -> list[str]:
        return ["--project-dir", str(self.project_dir), "--profiles-dir", str(PROFILES_DIR), "--target", self.target]

    def _variables(self) -> dict[str, str]:
        return {"LAKEHISTORY_SCHEMA": self.schema, "LAKEHISTORY_LANDING": self.landing_root}

    def process(self, *args: str) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of `dbt args` as a process of its own (this venv's dbt)."""
        dbt = Path(sys.executable).parent / "dbt"
        return [str(dbt), "--no-use-colors", *args, *self._options()], {**os.environ, **self._variables()}

    def invoke(self, *args: str, vars: dict | None = None, callbacks: list | None = None) -> dbtRunnerResult:
        os.environ.update(self._variables())
        command: list[str] = [*args, *self._options()]
        if vars:
            import json

            command += ["--vars", json.dumps(vars)]
        return dbtRunner(callbacks=callbacks).invoke(command)

    def run_ok(self, *args: str, vars: dict | None = None) -> dbtRunnerResult:
        result = self.invoke(*args, vars=vars)
        if not result.success:
            raise AssertionError(f"dbt {' '.join(args)} failed: {describe_failure(result)}")
        return result

    def run_fails(self, *args: str, vars: dict | None = None) -> str:
        """Run a command that must fail; return the error text dbt reported."""
        logged: list[str] = []  # a run-operation's error reaches only the log

        def keep_errors(event: Any) -> None:
            if event.info.level == "error":
                logged.append(event.info.msg)

        result = self.invoke(*args, vars=vars, callbacks=[keep_errors] if args[0] == "run-operation" else None)
        assert not result.success, f"dbt {' '.join(args)} succeeded but should have failed"
        return "\n".join([describe_failure(result), *logged])

    # --- reading results back ----------------------------------------------------------
    @property
    def spark(self) -> Any:
        """dbt's Spark session (started through dbt, with the profile's settings, if none runs yet)."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        if SparkContext._active_spark_context is None and self.target == "local":
            self.run_ok("debug")
        return SparkSession.builder.getOrCreate()

    def compile_inline(self, sql: str) -> str:
        """`sql` (Jinja, e.g. a macro call) as dbt compiles it in this project."""
        result = self.run_ok("compile", "--inline", sql)
        return result.result.results[0].node.compiled_code

    def table(self, name: str) -> str:
        return f"`{self.schema}`.`{name}`"

    def rows(self, query: str) -> list[dict]:
        """Rows of a query as dicts; `{schema}` in the query is this project's schema."""
        return [
            row.asDict(recursive=True)
            for row in self.spark.sql(query.replace("{schema}", f"`{self.schema}`")).collect()
        ]


def stored_tables(spark: Any, schema: str) -> list[str]:
    """The tables of a schema, its views and the session's temporary views left out. Read with
    SHOW, not `spark.catalog.listTables`, which the tests' interpreted mode cannot decode."""
    views = {r.viewName for r in spark.sql(f"show views in `{schema}`").collect()}  # temporary ones too
    return [r.tableName for r in spark.sql(f"show tables in `{schema}`").collect() if r.tableName not in views]


def transaction_rows(*ids: int, history: str = "fenced", sync: str | None = None) -> str:
    """A SELECT of transactions-table rows (its columns, in order) with the ids `ids`, as a writer
    records them (ledger.insert_transactions); `sync`: the sync they belong to."""
    sync_id = "null" if sync is None else f"'{sync}'"
    return " union all ".join(
        f"select {int(i)}, 'uuid', 'batch', null, '{history}', null, null, null, null, null,"
        f" current_timestamp(), current_timestamp(), 0, 0, 0, 0, 0, 0, {sync_id}, null, null"
        for i in ids
    )


def describe_failure(result: dbtRunnerResult) -> str:
    if result.exception is not None:
        return f"{type(result.exception).__name__}: {result.exception}"
    messages = []
    for node_result in getattr(result.result, "results", None) or []:
        if str(getattr(node_result, "status", "")).lower() in {"error", "fail", "runtimeerror"}:
            node = getattr(node_result, "node", None)  # a run-operation's result has none
            messages.append(f"{node.name}: {node_result.message}" if node else str(node_result.message))
    return "\n".join(messages) or "no message"
