"""Runs a compiled dbt Python model in the session dbt already uses."""

from __future__ import annotations

from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.spark.connections import SparkCredentials
from dbt.adapters.sparksession import cut_short
from dbt.adapters.sparksession.session import active_session
from dbt_common.exceptions import DbtRuntimeError


class SessionPythonJobHelper(PythonJobHelper):
    """Submission method `session`: exec the compiled model with `spark` bound to dbt's session.

    The compiled code (model + dbt-spark's write step) needs one free variable, `spark`.
    """

    def __init__(self, parsed_model: dict, credentials: SparkCredentials) -> None:
        self.parsed_model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> Any:
        spark = active_session(self.credentials.server_side_parameters)
        name = self.parsed_model.get("unique_id") or self.parsed_model.get("alias", "python model")
        code = compile(compiled_code, f"<dbt python model {name}>", "exec")
        namespace: dict[str, Any] = {"spark": spark, "__name__": "__dbt_python_model__"}
        for attempt in range(2):
            try:
                exec(code, {**namespace})  # noqa: S102 - this is what a Python model is
                return None
            except DbtRuntimeError:
                raise
            except Exception as exc:  # surface the model's own error, named
                folder, relation = cut_short.folder_refused(str(exc)), self.parsed_model.get("relation_name")
                if attempt == 0 and folder is not None and relation:
                    cut_short.register(spark.sql, relation, folder)  # its write then replaces the table
                    continue
                raise DbtRuntimeError(f"Python model {name} failed: {type(exc).__name__}: {exc}") from exc
        return None
