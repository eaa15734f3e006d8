"""The `main_table` strategy's engine: a main table that people can correct with plain SQL.

    lakehistory.door.refresh_main_table   # from the strategy macro, through the door

A main table (seed 003: the domain table beside its `_hx` table) is a Delta table with Change
Data Feed on, NOT NULL on its key, on the columns its history table declares NOT NULL and on those
the model's contract declares, and the model's CHECK constraints; Delta refuses an edit that breaks
one. A person may INSERT, UPDATE, DELETE or MERGE into it. The next run of its history model reads
those commits from the change feed and applies them to the history as transactions of their own
(landing/edits.py); from there they reach `_hx`, events and states like any batch.

Each build then makes the table equal to the model's rows (its current rows, with `mod_time` and
`mod_user` from the history, over whatever a person wrote in them) in one MERGE that matches rows
on every column: a row that is exactly as the model gives it is left alone, and only the rows
that differ are deleted or inserted. The table is never dropped or rebuilt, `--full-refresh`
included: its Delta log holds the edits the next run reads, and an edit made while a run applies
is read by the next one. The build's commits carry lakehistory's mark (edits.own_commit_metadata),
which the capture skips.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark.sql import SparkSession

from lakehistory.errors import LakehistoryError
from lakehistory.history.ledger import USER_METADATA
from lakehistory.history.session import own_session, session_conf
from lakehistory.history.transactions import create_if_missing
from lakehistory.invocation import say
from lakehistory.landing.edits import own_commit_metadata
from lakehistory.landing.spec import first_line
from lakehistory.sql import q

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
# A person's commit between the MERGE's read and its commit makes Delta refuse the MERGE; it is
# read again over the new version. The person's edit stands and the next run reads it.
MERGE_ATTEMPTS = 3


class MainTableError(LakehistoryError, ValueError):
    pass


def refresh(
    spark: SparkSession,
    invocation_id: str,
    target: str,
    staged: str,
    keys: Sequence[str],
    history: str | None,
    not_null: Sequence[str],
    checks: Sequence[Sequence[str]],
) -> dict[str, int]:
    """Make the main table `target` equal to the rows of `staged` (the model's), creating it
    with its constraints first; add the constraints and columns it lacks."""
    with own_session(spark) as own, session_conf(own, {USER_METADATA: own_commit_metadata(invocation_id)}):
        rows = own.table(staged)
        columns = dict(rows.dtypes)
        if missing := [k for k in keys if k not in columns]:
            raise MainTableError(
                f"{target}: the unique_key column(s) {', '.join(missing)} are not among the model's columns"
            )
        required = {*keys, *not_null, *_not_null_of(own, history, columns)}
        if not own.catalog.tableExists(target.replace("`", "")):
            body = ", ".join(f"{q(c)} {t}{' not null' if c in required else ''}" for c, t in columns.items())
            # a creation cut short (Delta's first commit, no metastore entry) is completed
            create_if_missing(
                own,
                target,
                f"create table if not exists {target} ({body}) using delta"
                f" tblproperties ('{CHANGE_DATA_FEED}' = 'true')",
            )
        _bring_up_to_date(own, target, columns)
        _add_checks(own, target, checks)
        return {"rows_changed": _merge(own, target, staged, list(columns))}


def _not_null_of(spark: SparkSession, history: str | None, columns: dict[str, str]) -> list[str]:
    """The model's columns that the history table declares NOT NULL (its source declares them)."""
    if not history or not spark.catalog.tableExists(history.replace("`", "")):
        return []
    return [f.name for f in spark.table(history).schema.fields if not f.nullable and f.name in columns]


def _bring_up_to_date(spark: SparkSession, target: str, columns: dict[str, str]) -> None:
    """Change Data Feed on and every column of the model's, on a table made before or by hand."""
    properties = {r.key: r.value for r in spark.sql(f"show tblproperties {target}").collect()}
    if properties.get(CHANGE_DATA_FEED, "false").lower() != "true":
        spark.sql(f"alter table {target} set tblproperties ('{CHANGE_DATA_FEED}' = 'true')")
    have = set(spark.table(target).columns)
    if new := [c for c in columns if c not in have]:
        spark.sql(f"alter table {target} add columns ({', '.join(f'{q(c)} {columns[c]}' for c in new)})")


def _add_checks(spark: SparkSession, target: str, checks: Sequence[Sequence[str]]) -> None:
    """The model's CHECK constraints the table lacks. Delta checks the rows there when one is
    added: a row that breaks it stops the build, naming the constraint."""
    if not checks:
        return
    have = {r.key.lower() for r in spark.sql(f"show tblproperties {target}").collect()}
    for name, expression in checks:
        if f"delta.constraints.{name}".lower() not in have:
            spark.sql(f"alter table {target} add constraint {q(name)} check ({expression})")


def _merge(spark: SparkSession, target: str, staged: str, columns: list[str]) -> int:
    """One MERGE that matches rows on every column (null-safe): the model's rows the table lacks
    are inserted, the table's rows the model lacks are deleted, the rest stay as they are. A row
    a person changed is thereby replaced, and a key a person added twice is left with one row."""
    on = " and ".join(f"t.{q(c)} <=> s.{q(c)}" for c in columns)
    statement = (
        f"merge into {target} as t using (select * from {staged}) as s on {on}"
        " when not matched then insert * when not matched by source then delete"
    )
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        try:
            metrics = spark.sql(statement).collect()
            break
        except Exception as exc:
            if "Concurrent" not in type(exc).__name__ + str(exc)[:300] or attempt == MERGE_ATTEMPTS:
                raise
            say(
                f"{target}: a commit of the table came between this build's read and its write"
                f" ({first_line(exc)}); once more."
            )
            time.sleep(attempt)
    row = metrics[0].asDict() if metrics else {}
    return int(row.get("num_inserted_rows", 0) or 0) + int(row.get("num_deleted_rows", 0) or 0)
