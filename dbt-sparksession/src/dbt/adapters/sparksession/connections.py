"""Credentials and connections: dbt-spark's session method under the `sparksession` type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbt.adapters.spark.connections import SparkConnectionManager, SparkCredentials


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


class SparkSessionConnectionManager(SparkConnectionManager):
    TYPE = "sparksession"
