"""The column names that mean something to the product, declared once.

Fivetran's history-mode protocol has exactly five columns of its own (spec/fivetran-history-mode.md).
Every other column a connector sends is data, whatever its name: `_fivetran_deleted` (the usual
deleted column), `_fivetran_id` (the key Fivetran gives a table without one) and any
connector-specific `_fivetran_*` column are kept like any other column.

The product reserves the names of the columns it adds to the tables it builds, per kind of table
(`RESERVED`). A source column with one of them is refused with an error naming the column and the
table, never dropped. Spark resolves names without regard to case, so neither does the check.
"""

from __future__ import annotations

from collections.abc import Iterable

from lakehistory.errors import LakehistoryError

# Fivetran's history-mode protocol: the four columns a history table stores, and the seed form's
# earliest flag, which is never stored.
START = "_fivetran_start"
END = "_fivetran_end"
ACTIVE = "_fivetran_active"
SYNCED = "_fivetran_synced"
EARLIEST = "_fivetran_earliest"
FIVETRAN_SYSTEM = (START, END, ACTIVE, SYNCED)
FIVETRAN_PROTOCOL = (*FIVETRAN_SYSTEM, EARLIEST)

# Transaction time: a history table's versions (`removal` in the append-only variant).
VALID_FROM = "valid_from"
VALID_TO = "valid_to"
REMOVAL = "removal"
TRANSACTION_TIME = (VALID_FROM, VALID_TO, REMOVAL)

# Every column a history table adds to its source's columns.
HISTORY_SYSTEM = (*FIVETRAN_SYSTEM, *TRANSACTION_TIME)

# Staging's columns on every staged row, and the names the engine's queries give the columns they
# compute, all start with this: a source column may not.
STAGING_PREFIX = "_lh_"

# The key of a staged column's metadata that says the source declares it NOT NULL (staging writes
# it, the history table's creation reads it).
NOT_NULL_METADATA = "lakehistory.not_null"

# A daily extract's own columns, and the ones dbt's snapshot of it adds.
EXTRACTED_AT = "extracted_at"
EXTRACTED_BY = "extracted_by"
EXTRACT_SYSTEM = (EXTRACTED_AT, EXTRACTED_BY)
SNAPSHOT_SYSTEM = ("dbt_scd_id", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to", "dbt_is_deleted")

# `_hx` tables (seed 003): besides these, `<table>_hx_id` and one `<parent>_hx_id` per foreign key.
MOD_TIME = "mod_time"
MOD_USER = "mod_user"
DELETED = "deleted"
TXN_ID = "txn_id"
HX_SYSTEM = (MOD_TIME, MOD_USER, DELETED, TXN_ID)

# Event history (seed 001) and feature states (seed 002).
EVENT_SYSTEM = ("_hist_trans_id", "_hist_user", "_hist_event", "_hist_time", "_hist_valid_time")
STATE_SYSTEM = (
    "action",
    "version",
    "uuid",
    "puuid",
    "txn",
    TXN_ID,
    "author",
    "app_id",
    "created_at",
    "updated_at",
    "rtcts",
    "rtuts",
    "valid_created_at",
    "valid_updated_at",
    DELETED,
    "xyz",
)

# What a source column may not be called, per kind of table built from it. A staged row carries
# the protocol's columns next to the source's; a history table adds transaction time.
RESERVED = {
    "landing": FIVETRAN_PROTOCOL,
    "history": (*FIVETRAN_PROTOCOL, *TRANSACTION_TIME),
    "extract": (*EXTRACT_SYSTEM, *SNAPSHOT_SYSTEM),
    "hx": HX_SYSTEM,
    "events": EVENT_SYSTEM,
    "states": STATE_SYSTEM,
}


# The open end: the `valid_to` of a current row, by the type of transaction time (var
# lakehistory_version_type), unless the var lakehistory_open_end makes it NULL.
END_OF_TIME = {"integer": "9223372036854775807", "timestamp": "timestamp'9999-12-31 23:59:59.999999'"}
# Fivetran's: the `_fivetran_end` of an active row (milliseconds).
FIVETRAN_END_OF_TIME = "timestamp'9999-12-31 23:59:59.999'"


class ReservedNameError(LakehistoryError, ValueError):
    """A source column whose name the product gives a column of its own."""


def hx_id(table: str) -> str:
    """`xxx` -> `xxx_hx_id`: the full main-table name, not its key's (seed 003)."""
    return f"{table}_hx_id"


def collisions(columns: Iterable[str], reserved: Iterable[str], staging_prefix: bool = True) -> list[str]:
    """The columns whose name is reserved (or, with `staging_prefix`, starts with `_lh_`), in order."""
    taken = {name.lower() for name in reserved}
    return [c for c in columns if c.lower() in taken or (staging_prefix and c.lower().startswith(STAGING_PREFIX))]


def refuse_reserved(table: str, columns: Iterable[str], kind: str, extra: Iterable[str] = (), hint: str = "") -> None:
    """Raise ReservedNameError naming each column of `table` whose name the product reserves for
    a `kind` table (plus `extra`, names that depend on the table). `{column}` in `hint` is the
    first of them."""
    reserved = (*RESERVED[kind], *extra)
    if clash := collisions(columns, reserved):
        names = ", ".join(clash)
        raise ReservedNameError(
            f"{table}: column{'s' if len(clash) > 1 else ''} {names} ha{'ve' if len(clash) > 1 else 's'} a name"
            f" lakehistory gives a column of its own ({', '.join(reserved)}, or any name starting with"
            f" {STAGING_PREFIX}). {(hint or 'Rename it before it reaches lakehistory.').replace('{column}', clash[0])}"
        )
