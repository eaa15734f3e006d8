"""The `sparksession` adapter: dbt-spark plus in-session Python models, safe seeds and
custom incremental strategies."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from dbt.adapters.base import ConstraintSupport, PythonJobHelper, available
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.types import ConstraintNotSupported
from dbt.adapters.spark.column import SparkColumn
from dbt.adapters.spark.impl import LIST_RELATIONS_MACRO_NAME, SparkAdapter
from dbt.adapters.sparksession.connections import SparkSessionConnectionManager
from dbt.adapters.sparksession.python_job import SessionPythonJobHelper
from dbt.adapters.sparksession.session import active_session
from dbt_common.contracts.constraints import ColumnLevelConstraint, ConstraintType, ModelLevelConstraint
from dbt_common.events.functions import warn_or_error
from dbt_common.exceptions import CompilationError, DbtRuntimeError

# How Spark says a schema or a table is missing, from 4.0 on (dbt-spark 1.10 has only the table's
# list, 1.11 both: the adapter keeps its own so that it runs with either).
SCHEMA_NOT_FOUND_MESSAGES = (
    "[SCHEMA_NOT_FOUND]",
    "Schema not found",
    "Database not found",
    "NoSuchNamespaceException",
    "NoSuchDatabaseException",
)
TABLE_OR_VIEW_NOT_FOUND_MESSAGES = ("[TABLE_OR_VIEW_NOT_FOUND]", "Table or view not found", "NoSuchTableException")


def _seed_cell(value: Any) -> str | None:
    """A parsed seed cell as the string Spark casts to the column type; None stays NULL."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _constraint_name(column: str, suffix: str) -> str:
    """A name for a constraint the contract leaves unnamed: Delta names every constraint."""
    return "".join(c if c.isalnum() else "_" for c in column.lower()) + "_" + suffix


def _quote(identifier: Any) -> str:
    """`identifier`, with a backtick inside doubled (dbt-spark leaves it as it is, so a name
    holding one ends the quoted name early). dbt also quotes parts it has not got (None), as
    dbt-spark does: as their text."""
    return "`" + str(identifier).replace("`", "``") + "`"


@dataclasses.dataclass
class SessionColumn(SparkColumn):
    @property
    def quoted(self) -> str:
        return _quote(self.column)


class SparkSessionAdapter(SparkAdapter):
    ConnectionManager = SparkSessionConnectionManager
    Column = SessionColumn

    # Delta enforces NOT NULL and CHECK constraints; it has no primary, foreign or unique keys,
    # so dbt warns about those and leaves them out.
    CONSTRAINT_SUPPORT = {
        ConstraintType.check: ConstraintSupport.ENFORCED,
        ConstraintType.not_null: ConstraintSupport.ENFORCED,
        ConstraintType.unique: ConstraintSupport.NOT_SUPPORTED,
        ConstraintType.primary_key: ConstraintSupport.NOT_SUPPORTED,
        ConstraintType.foreign_key: ConstraintSupport.NOT_SUPPORTED,
    }

    def quote(self, identifier: str) -> str:  # type: ignore[override]
        return _quote(identifier)

    def get_columns_in_relation(self, relation: Any) -> list[SessionColumn]:  # type: ignore[override]
        return [
            SessionColumn(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})
            for c in super().get_columns_in_relation(relation)
        ]

    # --- Listing a schema --------------------------------------------------------
    LISTING_ATTEMPTS = 5

    def list_relations_without_caching(self, schema_relation: Any) -> list[Any]:  # type: ignore[override]
        """The schema's relations; listed again when one vanished while it was being listed.

        SHOW TABLE EXTENDED lists the names, then looks up each one. A table or temporary view
        dropped in between (by another session, or by another thread of this one) fails the
        lookup, and dbt-spark takes that failure for an empty schema: dbt then believes the
        schema's tables are gone, and an incremental model builds its table from scratch. Here
        only a missing schema has no relations."""
        message = ""
        for _ in range(self.LISTING_ATTEMPTS):
            try:
                rows = self.execute_macro(LIST_RELATIONS_MACRO_NAME, kwargs={"schema_relation": schema_relation})
            except DbtRuntimeError as exc:
                message = getattr(exc, "msg", "") or str(exc)
                if any(m in message for m in SCHEMA_NOT_FOUND_MESSAGES):
                    return []
                if "not supported for v2 tables" in message:  # dbt-spark lists those another way
                    return super().list_relations_without_caching(schema_relation)
                if not any(m in message for m in TABLE_OR_VIEW_NOT_FOUND_MESSAGES):
                    raise
                continue
            return self._build_spark_relation_list(row_list=rows, relation_info_func=self._get_relation_information)
        raise DbtRuntimeError(
            f"Could not list the relations of {schema_relation}: tables were dropped while it was being"
            f" listed, {self.LISTING_ATTEMPTS} times in a row. The last error: {message}"
        )

    # --- Python models -----------------------------------------------------------
    @property
    def default_python_submission_method(self) -> str:
        return "session"

    @property
    def python_submission_helpers(self) -> dict[str, type[PythonJobHelper]]:
        return {**super().python_submission_helpers, "session": SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")

    def spark_session(self):  # noqa: ANN201 - pyspark's SparkSession (classic or Connect)
        return active_session(self.config.credentials.server_side_parameters)

    @available
    def call_python(self, target: str, kwargs: Mapping[str, Any]) -> Any:
        """Call `package.module:function(spark, **kwargs)` in dbt's own SparkSession.

        The bridge from a macro to Python code that needs the session itself (reading files with
        DataFrame options, say). Errors surface as dbt errors with the function's own message.
        """
        module_name, _, function_name = target.partition(":")
        try:
            function = getattr(importlib.import_module(module_name), function_name)
        except (ImportError, AttributeError) as exc:
            raise DbtRuntimeError(f"adapter.call_python: cannot import {target!r}: {exc}") from exc
        try:
            return function(self.spark_session(), **dict(kwargs))
        except DbtRuntimeError:
            raise
        except Exception as exc:
            raise DbtRuntimeError(str(exc)) from exc

    # --- Seeds -----------------------------------------------------------------
    @available
    def load_seed_rows(self, relation: Any, agate_table: Any, column_types: Mapping[str, str]) -> int:
        """Append a seed's rows to its (already created) table through a DataFrame.

        dbt-spark's session method pastes every cell into an INSERT as `'value'`: empty cells
        become the string 'None' and a quote breaks the statement. Here cells travel as data,
        are cast by Spark to the column types, and a cell that does not cast is an error that
        names the seed, column and row instead of a silent NULL.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        names: list[str] = list(agate_table.column_names)
        types = [column_types.get(name) or self.convert_type(agate_table, i) for i, name in enumerate(names)]
        rows = [[n, *(_seed_cell(cell) for cell in row)] for n, row in enumerate(agate_table.rows, start=1)]
        if not rows:
            return 0
        spark = self.spark_session()
        positional = [f"c{i}" for i in range(len(names))]  # seed headers may be any text
        schema = StructType([StructField("_seed_row", LongType())] + [StructField(c, StringType()) for c in positional])
        raw = spark.createDataFrame(rows, schema)
        typed = raw.select(
            "_seed_row",
            *[F.col(c).alias(f"raw_{c}") for c in positional],
            *[F.col(c).cast(t).alias(c) for c, t in zip(positional, types)],
        )
        bad_cell = [
            F.when(F.col(f"raw_{c}").isNotNull() & F.col(c).isNull(), F.lit(i)) for i, c in enumerate(positional)
        ]
        bad = typed.select("_seed_row", F.coalesce(*bad_cell).alias("col")).where("col is not null").limit(1).collect()
        if bad:
            row_index, col_index = bad[0]["_seed_row"], bad[0]["col"]
            raise DbtRuntimeError(
                f"Seed {relation}: column {names[col_index]!r} has type {types[col_index]}, but the value "
                f"{rows[row_index - 1][col_index + 1]!r} in data row {row_index} does not convert to it."
            )
        typed.select(*positional).write.insertInto(str(relation))
        return len(rows)

    # --- Model contracts on Delta -------------------------------------------------------
    @available
    def delta_checks(self, columns: Mapping[str, Mapping[str, Any]], constraints: list[dict[str, Any]]) -> list:
        """A contracted model's constraints as the Delta CHECK constraints that enforce them,
        [name, expression] each: a `check` under its own name (or one made from its column and
        position), a `not_null` as `<column> is not null` named `<column>_not_null`.

        NOT NULL is a CHECK here because the table is created and filled by one statement, and
        Spark allows no column list in CREATE OR REPLACE TABLE ... AS SELECT; Delta refuses to
        make an existing column NOT NULL afterwards. Constraints Delta has no place for are
        reported by dbt's own warning and left out."""

        def supported(constraint: ColumnLevelConstraint | ModelLevelConstraint) -> bool:
            if constraint.type == ConstraintType.custom:  # DDL text of another database's dialect
                warn_or_error(ConstraintNotSupported(constraint=constraint.type.value, adapter=self.type()))
                return False
            return self.process_parsed_constraint(constraint, lambda c: "kept") is not None

        checks: list[list[str]] = []
        for column in columns.values():
            name = column["name"]
            for n, raw in enumerate(column.get("constraints") or [], start=1):
                constraint = self._parse_column_constraint(raw)
                if not supported(constraint):
                    continue
                if constraint.type == ConstraintType.not_null:
                    checks.append([_constraint_name(name, "not_null"), f"{self.quote(name)} is not null"])
                elif constraint.type == ConstraintType.check and constraint.expression:
                    checks.append([constraint.name or _constraint_name(name, f"check_{n}"), constraint.expression])
        for n, raw in enumerate(constraints or [], start=1):
            model_constraint = self._parse_model_constraint(raw)
            expression = model_constraint.expression
            if supported(model_constraint) and model_constraint.type == ConstraintType.check and expression:
                checks.append([model_constraint.name or f"check_{n}", expression])
        return checks

    # --- Custom incremental strategies --------------------------------------------------
    def valid_incremental_strategies(self) -> list[str]:
        """The strategies dbt-spark implements itself; everything else is a custom strategy."""
        return ["append", "merge", "insert_overwrite", "microbatch"]

    @available
    def is_builtin_incremental_strategy(self, strategy: str) -> bool:
        return strategy in self.valid_incremental_strategies()

    def get_incremental_strategy_macro(self, model_context: Mapping[str, Any], strategy: str) -> Callable:
        """Find `get_incremental_<strategy>_sql` in the root project, like dbt-core does, and
        also in installed packages, so a package's strategy needs no wrapper macro."""
        macro_name = f"get_incremental_{strategy}_sql"
        if macro_name in model_context:
            return model_context[macro_name]
        found = {
            package: namespace[macro_name]
            for package, namespace in model_context.items()
            if isinstance(namespace, Mapping) and macro_name in namespace
        }
        if len(found) == 1:
            return next(iter(found.values()))
        # A model that names a strategy nobody defines is a compilation error, as in dbt itself.
        if found:
            raise CompilationError(
                f"Incremental strategy {strategy!r} is defined by several packages ({', '.join(sorted(found))}); "
                f"define {macro_name} in your project to choose one."
            )
        raise CompilationError(
            f"Unknown incremental strategy {strategy!r}: no macro named {macro_name} in the project or its "
            f"packages. Built-in strategies: {', '.join(self.valid_incremental_strategies())}."
        )
