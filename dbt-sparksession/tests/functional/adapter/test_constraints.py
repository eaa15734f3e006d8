"""dbt's model contract and constraint cases (dbt.tests.adapter.constraints) on Delta.

Delta enforces CHECK constraints (a not_null is the CHECK `<column> is not null`); the adapter
writes them into the statement that creates the table, so a row that breaks one fails the build
and leaves the table as it was (the rollback cases expect the old rows, as on a database with
transactions). Primary, foreign and unique keys do not exist in Delta: dbt warns and leaves them
out of the DDL.
"""

from __future__ import annotations

import pytest
from dbt.tests.adapter.constraints import fixtures
from dbt.tests.adapter.constraints.test_constraints import (
    BaseConstraintQuotedColumn,
    BaseConstraintsRollback,
    BaseConstraintsRuntimeDdlEnforcement,
    BaseIncrementalConstraintsColumnsEqual,
    BaseIncrementalConstraintsRollback,
    BaseIncrementalConstraintsRuntimeDdlEnforcement,
    BaseIncrementalContractSqlHeader,
    BaseIncrementalForeignKeyConstraint,
    BaseModelConstraintsRuntimeEnforcement,
    BaseTableConstraintsColumnsEqual,
    BaseTableContractSqlHeader,
    BaseViewConstraintsColumnsEqual,
)

# The fixtures' column type `text` is PostgreSQL's; Spark says `string`.
SCHEMA_YML = fixtures.model_schema_yml.replace("text", "string")
FK_SCHEMA_YML = fixtures.model_fk_constraint_schema_yml.replace("text", "string")
MODEL_CONSTRAINTS_YML = fixtures.constrained_model_schema_yml.replace("text", "string")
QUOTED_SCHEMA_YML = fixtures.model_quoted_column_schema_yml.replace("text", "string").replace('"from"', "`from`")


class OnDelta:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+file_format": "delta"}}


def delta_ddl(checks: list[str], columns: str, model_sql: str) -> str:
    """The statement the adapter runs: the constraints as Delta CHECK constraints, and the rows."""
    properties = ",\n".join(f"'delta.constraints.{check}" for check in checks)
    return f"create or replace table <model_identifier> using delta tblproperties ({properties})" + (
        f" as select {columns} from ({model_sql}) as model_subq"
    )


FK_MODEL_SQL = """
    -- depends_on: <foreign_key_model_identifier>
    select
    'blue' as color,
    1 as id,
    '2019-01-01' as date_day
"""
FK_CHECKS = ["id_not_null' = '`id` is not null'", "id_check_3' = '(id > 0)'", "id_check_4' = 'id >= 1'"]


def fk_models(my_model_sql: str, schema_yml: str = FK_SCHEMA_YML) -> dict:
    return {
        "my_model.sql": my_model_sql,
        "foreign_key_model.sql": fixtures.foreign_key_model_sql,
        "constraints_schema.yml": schema_yml,
    }


class SparkTypes:
    """Types as Spark names them: in a contract, and in dbt's mismatch message (Spark's own names)."""

    @pytest.fixture
    def string_type(self):
        return "string"

    @pytest.fixture
    def int_type(self):
        return "int"

    @pytest.fixture
    def data_types(self):
        # sql value, contract type, the type dbt reports for the value
        return [
            ["1", "int", "int"],
            ["'1'", "string", "string"],
            ["true", "boolean", "boolean"],
            ["array('1','2','3')", "array<string>", "array<string>"],
            ["array(1,2,3)", "array<int>", "array<int>"],
            ["cast(6.45 as decimal(4, 2))", "decimal(4,2)", "decimal(4,2)"],
            ["cast('2019-01-01' as date)", "date", "date"],
            ["cast('2019-01-01' as timestamp)", "timestamp", "timestamp"],
        ]


class TestTableConstraintsColumnsEqual(OnDelta, SparkTypes, BaseTableConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_wrong_name_sql,
            "constraints_schema.yml": SCHEMA_YML,
        }


class TestViewConstraintsColumnsEqual(SparkTypes, BaseViewConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_view_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_view_wrong_name_sql,
            "constraints_schema.yml": SCHEMA_YML,
        }


class TestIncrementalConstraintsColumnsEqual(OnDelta, SparkTypes, BaseIncrementalConstraintsColumnsEqual):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model_wrong_order.sql": fixtures.my_model_incremental_wrong_order_sql,
            "my_model_wrong_name.sql": fixtures.my_model_incremental_wrong_name_sql,
            "constraints_schema.yml": SCHEMA_YML,
        }


class TestTableConstraintsDdlEnforcement(OnDelta, BaseConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return fk_models(fixtures.my_model_wrong_order_depends_on_fk_sql)

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return delta_ddl(FK_CHECKS, "id, color, date_day", FK_MODEL_SQL)


class TestIncrementalConstraintsDdlEnforcement(OnDelta, BaseIncrementalConstraintsRuntimeDdlEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return fk_models(fixtures.my_model_incremental_wrong_order_depends_on_fk_sql)

    @pytest.fixture(scope="class")
    def expected_sql(self):
        return delta_ddl(FK_CHECKS, "id, color, date_day", FK_MODEL_SQL)


class TestModelConstraintsRuntimeEnforcement(OnDelta, BaseModelConstraintsRuntimeEnforcement):
    @pytest.fixture(scope="class")
    def models(self):
        return fk_models(fixtures.my_model_wrong_order_depends_on_fk_sql, MODEL_CONSTRAINTS_YML)

    @pytest.fixture(scope="class")
    def expected_sql(self):
        checks = ["id_not_null' = '`id` is not null'", "check_1' = '(id > 0)'", "check_2' = 'id >= 1'"]
        return delta_ddl(checks, "id, color, date_day", FK_MODEL_SQL)


class TestConstraintQuotedColumn(OnDelta, BaseConstraintQuotedColumn):
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "my_model.sql": fixtures.my_model_with_quoted_column_name_sql.replace('"from"', "`from`"),
            "constraints_schema.yml": QUOTED_SCHEMA_YML,
        }

    @pytest.fixture(scope="class")
    def expected_sql(self):
        checks = [
            "id_not_null' = '`id` is not null'",
            "from_not_null' = '`from` is not null'",
            "check_1' = '(`from` = \\'blue\\')'",
        ]
        return delta_ddl(checks, "id, `from`, date_day", "select 'blue' as `from`, 1 as id, '2019-01-01' as date_day")


class DeltaViolations(OnDelta):
    @pytest.fixture(scope="class")
    def expected_error_messages(self):
        return ["CHECK constraint id_not_null (id IS NOT NULL) violated"]


class TestTableConstraintsRollback(DeltaViolations, BaseConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {"my_model.sql": fixtures.my_model_sql, "constraints_schema.yml": SCHEMA_YML}


class TestIncrementalConstraintsRollback(DeltaViolations, BaseIncrementalConstraintsRollback):
    @pytest.fixture(scope="class")
    def models(self):
        return {"my_model.sql": fixtures.my_incremental_model_sql, "constraints_schema.yml": SCHEMA_YML}


class TestIncrementalForeignKeyConstraint(OnDelta, BaseIncrementalForeignKeyConstraint):
    pass


# dbt-spark sends a model's sql_header and the model's statement to Spark as one string, and
# Spark parses a string as one statement: `set time zone 'Asia/Kolkata';select ...` is refused
# as a malformed SET. (The fixture's header, `set session time zone`, is PostgreSQL's besides.)
SQL_HEADER = "Spark runs one statement per call; dbt-spark prepends the sql_header to the model's statement"


@pytest.mark.skip(reason=SQL_HEADER)
class TestTableContractSqlHeader(BaseTableContractSqlHeader):
    pass


@pytest.mark.skip(reason=SQL_HEADER)
class TestIncrementalContractSqlHeader(BaseIncrementalContractSqlHeader):
    pass
