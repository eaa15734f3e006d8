"""Small helpers for the SQL the engine writes: quoted identifiers and column lists.

Only identifiers (column and table names from the project's configuration) and numbers the
merge computes itself go into SQL text. Data values (keys, authors, batch ids) never do: they
travel as DataFrame rows or as bound parameters.
"""

from __future__ import annotations

from collections.abc import Iterable


def q(name: str) -> str:
    """A quoted identifier: `name`, with backticks inside doubled."""
    return "`" + name.replace("`", "``") + "`"


def lit(text: str) -> str:
    """A SQL string literal of an identifier (for array_contains over column names)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cols(names: Iterable[str], alias: str | None = None) -> str:
    """`a`.`x`, `a`.`y`, ... (unqualified without an alias)."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + q(n) for n in names)


def same_key(left: str, right: str, keys: Iterable[str]) -> str:
    """left.k1 = right.k1 and left.k2 = right.k2 ..."""
    return " and ".join(f"{left}.{q(k)} = {right}.{q(k)}" for k in keys)
