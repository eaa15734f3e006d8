"""What the tables derived from a history table (`_hx`, events, feature states) share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from lakehistory.invocation import Invocation
from lakehistory.sql import lit, q


def take_new_columns(
    spark: SparkSession, table: str, columns: Sequence[str], types: Callable[[], Mapping[str, str]]
) -> list[str]:
    """Spec rule 17 ("add the column") for a derived table: each of `columns` that `table` lacks
    (Spark resolves names without regard to case, and so does this) is added to it after the
    columns it has, of its type in `types()` (read only when a column is new). Its rows from
    before read NULL in it, as the history table's versions from before do; no row changes.
    Returns the columns added."""
    have = {c.lower() for c in spark.table(table).columns}
    new = [c for c in columns if c.lower() not in have]
    if new:
        typed = types()
        spark.sql(f"alter table {table} add columns ({', '.join(f'{q(c)} {typed[c]}' for c in new)})")
    return new


# -- NOT NULL carried from the history table ----------------------------------------------------------
#
# A column the source declares NOT NULL is NOT NULL in its history table (history/table.py). An
# event or a state holds the values of one of the history's versions, so the rule holds for its
# rows too, with one exception: a PURGE state of a key whose earlier states are all gone holds no
# values. dbt creates these tables (CREATE TABLE AS SELECT makes every column nullable, and Delta
# cannot tighten a column afterwards), so the rule is a Delta CHECK constraint, which Delta checks
# on the rows there and on every later write. The model's macro names its history table while dbt
# compiles it; the model's post-hook, once the table exists, adds the constraints.

# The rows of a kind of derived table that may hold NULL in a NOT NULL column of the history.
EXEMPT = {"events": None, "states": ("action", "PURGE")}


@dataclass(frozen=True)
class Derived:
    history: str
    columns: tuple[str, ...]  # the data columns the model takes from the history table
    kind: str


@dataclass
class Compiled:
    """An invocation's part (invocation.py): per derived table, its history table, named while
    dbt compiled the model."""

    tables: dict[str, Derived] = field(default_factory=dict)


def compiled(invocation: Invocation, table: str, derived: Derived) -> None:
    """While dbt compiles the model of `table`: its history table, for the model's post-hook."""
    if derived.kind not in EXEMPT:
        raise ValueError(f"{table}: no NOT NULL rule for a derived table of kind {derived.kind!r}")
    with invocation.mutex:
        invocation.part(Compiled).tables[table] = derived


def carry_not_null(spark: SparkSession, invocation: Invocation, table: str) -> list[str]:
    """The CHECK constraints `table` lacks for the NOT NULL data columns of its history table,
    added (Delta first checks the rows the table holds). Returns their names. No statement runs
    when the history table has no NOT NULL data column, nor for a table no macro compiled."""
    with invocation.mutex:
        derived = invocation.part(Compiled).tables.pop(table, None)
    if derived is None:
        return []
    taken = {c.lower() for c in derived.columns}
    required = [f.name for f in spark.table(derived.history).schema if not f.nullable and f.name.lower() in taken]
    if not required:
        return []
    existing = _checks(spark, table)
    added = []
    for column in required:
        check = not_null_check(column, EXEMPT[derived.kind])
        if check.lower() in existing.values():
            continue
        name = _free_name(column, existing)
        spark.sql(f"alter table {table} add constraint {q(name)} check ({check})")
        existing[name] = check.lower()
        added.append(name)
    return added


def loosen_not_null(spark: SparkSession, table: str, derived: Derived) -> list[str]:
    """Before new rows reach `table`: drop the CHECK constraints carry_not_null added for columns
    its history table no longer holds NOT NULL (the source's `not_null` taken out of its YAML:
    history/table.py, add_new_columns), so that their NULLs from then on can be written.
    Returns their names."""
    taken = {c.lower() for c in derived.columns}
    nullable = [f.name for f in spark.table(derived.history).schema if f.nullable and f.name.lower() in taken]
    existing = _checks(spark, table)
    dropped = []
    for column in nullable:
        check, stem = not_null_check(column, EXEMPT[derived.kind]).lower(), _stem(column)
        for name, value in existing.items():
            if value == check and (name == stem or name.startswith(f"{stem}_")):
                spark.sql(f"alter table {table} drop constraint {q(name)}")
                dropped.append(name)
    return dropped


def _checks(spark: SparkSession, table: str) -> dict[str, str]:
    """The table's CHECK constraints: name to its condition, in lower case."""
    prefix = "delta.constraints."
    return {
        r["key"][len(prefix) :]: r["value"].strip().lower()
        for r in spark.sql(f"show tblproperties {table}").collect()  # a command on Delta's log: no Spark job
        if r["key"].startswith(prefix)
    }


def not_null_check(column: str, exempt: tuple[str, str] | None) -> str:
    check = f"{q(column)} is not null"
    return check if exempt is None else f"{check} or {q(exempt[0])} = {lit(exempt[1])}"


def _free_name(column: str, taken: Mapping[str, str]) -> str:
    """`<column>_not_null` (dbt's contracts name theirs so too: the adapter's delta_checks), with
    a number after it when two columns' names differ only where a constraint name cannot."""
    stem = _stem(column)
    name, n = stem, 1
    while name in taken:
        n += 1
        name = f"{stem}_{n}"
    return name


def _stem(column: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in column.lower()) + "_not_null"
