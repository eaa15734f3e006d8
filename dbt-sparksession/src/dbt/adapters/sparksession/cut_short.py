"""A table whose creation was cut short: Delta committed the table's folder and the process died
before the metastore registered it. Every later creation of the table is refused
(DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION), so a model whose first build was killed would fail
on every run. The adapter registers the folder as the table and builds the model again over it,
replacing its rows in one commit (a Delta table's history keeps the cut-short build)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

REFUSAL = "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"
_FOLDER = re.compile(r"location \('(.*?)'\) is not empty", re.IGNORECASE)
# dbt-spark's CREATE of a model's table: `create [or replace] table <relation>` ..., after dbt's
# query comment
_NAME = r"(?:`[^`]*`|[\w$]+)"
_CREATE = re.compile(
    rf"^(\s*(?:/\*.*?\*/\s*)*create\s+)(?:or\s+replace\s+)?(table\s+)({_NAME}(?:\.{_NAME})*)", re.IGNORECASE | re.DOTALL
)


def folder_refused(error: str) -> str | None:
    """The folder Delta refused to create a table at, when `error` is that refusal."""
    found = _FOLDER.search(error) if REFUSAL in error.upper() else None
    return found.group(1) if found else None


def created_relation(sql: str) -> str | None:
    """The relation a CREATE TABLE statement creates (as written), else None."""
    found = _CREATE.match(sql)
    return found.group(3) if found else None


def as_replace(sql: str) -> str:
    """The CREATE TABLE statement as a CREATE OR REPLACE TABLE."""
    return _CREATE.sub(r"\1or replace \2\3", sql, count=1)


def register(run_sql: Callable[[str], Any], relation: str, folder: str) -> None:
    """Register the table Delta committed at `folder` as `relation` (an external table there)."""
    location = folder.replace("\\", "\\\\").replace("'", "\\'")
    try:
        run_sql(f"create table {relation} using delta location '{location}'")
    except Exception as exc:
        if "already exists" in str(exc).lower():
            return  # another writer registered it meanwhile
        raise DbtRuntimeError(
            f"{relation} cannot be created: its folder {folder} holds files but no table Delta can read (a"
            " creation cut short before its first commit was whole). Move the folder away and run again."
        ) from exc
