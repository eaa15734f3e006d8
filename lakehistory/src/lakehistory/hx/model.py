"""What an `_hx` table is: its name, key, columns and foreign keys, and the system columns."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehistory.errors import LakehistoryError
from lakehistory.names import DELETED, MOD_TIME, MOD_USER, TXN_ID, hx_id
from lakehistory.sql import q


class HxError(LakehistoryError, ValueError):
    """An `_hx` model that cannot be built as configured."""


def hx_table(table: str) -> str:
    """`xxx` -> `xxx_hx` (seed 003)."""
    return f"{table}_hx"


def col(name: str) -> Column:
    """A column by name, quoted (any name a Delta table can hold)."""
    return F.col(q(name))


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    parent_table: str  # the parent's main table: its history key is `<parent_table>_hx_id`
    parent_columns: tuple[str, ...]
    parent: DataFrame  # the parent's `_hx` rows

    @property
    def hx_column(self) -> str:
        return hx_id(self.parent_table)


@dataclass(frozen=True)
class HxSpec:
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...]  # the main table's columns, key first in source order
    foreign_keys: tuple[ForeignKey, ...] = ()

    @property
    def hx_id(self) -> str:
        return hx_id(self.table)

    @property
    def output_columns(self) -> list[str]:
        return [
            *self.columns,
            MOD_TIME,
            MOD_USER,
            DELETED,
            self.hx_id,
            *(fk.hx_column for fk in self.foreign_keys),
            TXN_ID,
        ]


def key_range(keys: DataFrame, column: str) -> Column:
    """A filter Delta can skip files with: `column` within the range `keys` hold (False when none)."""
    lo, hi = keys.agg(F.min(col(column)), F.max(col(column))).collect()[0]  # one row
    if lo is None:
        return F.lit(False)
    return col(column).between(F.lit(lo), F.lit(hi))
