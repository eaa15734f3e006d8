"""Credentials and connections: dbt-spark's session method under the `sparksession` type."""

from __future__ import annotations

import re
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials
from dbt.adapters.sparksession import cut_short
from dbt.adapters.sparksession.session import CLASS_PATH, refuse_missing_jars
from dbt_common.exceptions import DbtRuntimeError

METASTORE_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"


@dataclass
class SparkSessionCredentials(SparkCredentials):
    """dbt-spark credentials whose method defaults to `session`; `host` is only a label here."""

    @classmethod
    def __pre_deserialize__(cls, data: Any) -> Any:
        data = super().__pre_deserialize__(data)
        data.setdefault("method", "session")
        data.setdefault("host", "session")
        return data

    @property
    def type(self) -> str:
        return "sparksession"


def metastore_in_use(server_side_parameters: dict[str, str], error: str) -> str | None:
    """The embedded Derby metastore's folder, when `error` is Hive failing to open it because
    another process has it open (Derby's lock file is there), else None."""
    if "SessionHiveMetaStoreClient" not in error:
        return None
    found = re.match(r"jdbc:derby:;databaseName=([^;]+)", server_side_parameters.get(METASTORE_URL, ""))
    if found and (Path(found.group(1)) / "db.lck").exists():
        return found.group(1)
    return None


class SparkSessionConnectionManager(SparkConnectionManager):
    TYPE = "sparksession"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        """dbt-spark's, after checking that the jars an embedded session's class path names exist."""
        parameters = getattr(connection.credentials, "server_side_parameters", None) or {}
        if "spark.remote" not in parameters:
            refuse_missing_jars(parameters.get(CLASS_PATH, ""))
        return super().open(connection)

    @contextmanager
    def exception_handler(self, sql: str) -> Generator[None, None, None]:
        try:
            with super().exception_handler(sql):
                yield
        except DbtRuntimeError as exc:
            credentials = self.get_thread_connection().credentials
            folder = metastore_in_use(getattr(credentials, "server_side_parameters", {}), str(exc))
            if folder is None:
                raise
            raise DbtRuntimeError(
                f"The lakehouse is in use by another process: its embedded metastore ({folder}) admits one"
                " process at a time, and another dbt run, notebook or Spark shell has it open. Wait for it to"
                " end, or let every client share the lakehouse through a Spark Connect server (README,"
                " Profiles and Spark Connect)."
            ) from exc

    def add_query(self, sql: str, *args: Any, **kwargs: Any) -> tuple[Connection, Any]:
        """dbt-spark's, but a model's table whose creation was cut short (cut_short.py) is registered
        and the statement run again as a replace of it."""
        try:
            return super().add_query(sql, *args, **kwargs)
        except DbtRuntimeError as exc:
            relation, folder = cut_short.created_relation(sql), cut_short.folder_refused(str(exc))
            if relation is None or folder is None:
                raise
        cut_short.register(super().add_query, relation, folder)
        return super().add_query(cut_short.as_replace(sql), *args, **kwargs)
