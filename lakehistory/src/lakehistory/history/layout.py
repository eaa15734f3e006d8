"""What one history table's rows are made of, as the rules and their rewrites read it."""

from __future__ import annotations

from dataclasses import dataclass

from lakehistory.names import ACTIVE, END, FIVETRAN_SYSTEM, SYNCED


@dataclass(frozen=True)
class Layout:
    """The columns of one history table: source key, data columns in table order (the deleted
    column among them when the model names one) and their SQL types."""

    keys: tuple[str, ...]
    data: tuple[str, ...]
    types: dict[str, str]
    deleted_column: str | None = None
    # Columns the source declares NOT NULL, which the table declares NOT NULL when it is created.
    not_null: frozenset[str] = frozenset()

    @property
    def plain(self) -> tuple[str, ...]:
        """Data columns an update inherits through unmodified_string (never the deleted column)."""
        return tuple(c for c in self.data if c != self.deleted_column)

    @property
    def row(self) -> tuple[str, ...]:
        """Every column of a Fivetran row, in table order."""
        return (*self.keys, *self.data, *FIVETRAN_SYSTEM)

    @property
    def content(self) -> tuple[str, ...]:
        """What makes two rows of one (key, `_fivetran_start`) the same version."""
        return (*self.data, END, ACTIVE, SYNCED)
