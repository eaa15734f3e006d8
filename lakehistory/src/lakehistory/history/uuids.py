"""Naksha's uuid layout (seed 002), as a SQL expression: a version-4, variant-1 uuid that is not
random but names one object of one type, in one database, on one day. Bits, most significant first:

    object id bits 59..12 (48) | version 4 (4) | object id bits 11..0 (12)
    variant 0b10 (2) | year - 2000 (10) | month (4) | day (5) | object type (3) | database id (40)

The seed's diagram writes the version nibble as `1000`; its text, its example uuid and RFC 4122
say 4 (`0100`), which is what is written. The macro `naksha_uuid` returns this same expression.
"""

from __future__ import annotations

from lakehistory.errors import LakehistoryError

TRANSACTION = 0
FEATURE_STATE = 1
DATABASE_ID_BITS = 40


class DatabaseIdError(LakehistoryError, ValueError):
    pass


def database_id_of(value: object) -> int:
    """The project var `lakehistory_database_id`, checked to fit its 40 bits."""
    text = str(value)
    if isinstance(value, bool) or not text.isdigit() or int(text) >= 1 << DATABASE_ID_BITS:
        raise DatabaseIdError(f"var lakehistory_database_id must be an integer from 0 to 2^40 - 1, not {value}")
    return int(text)


def naksha_uuid_sql(object_id: str, at: str, object_type: int | str, database_id: int) -> str:
    """The uuid of object `object_id` (a SQL expression of an integer) of `object_type`, dated by
    the timestamp expression `at`, in database `database_id`."""
    if not 0 <= database_id < 1 << DATABASE_ID_BITS:
        raise DatabaseIdError(f"a database id is from 0 to 2^40 - 1, not {database_id}")
    oid = f"cast({object_id} as bigint)"
    high = f"shiftleft(shiftright({oid}, 12), 16) | 16384 | ({oid} & 4095)"
    low = (
        "shiftleft(2L, 62)"
        f" | shiftleft(cast(year({at}) - 2000 as bigint), 52)"
        f" | shiftleft(cast(month({at}) as bigint), 48)"
        f" | shiftleft(cast(day({at}) as bigint), 43)"
        f" | shiftleft(cast({object_type} as bigint), 40)"
        f" | {database_id}"
    )
    return (
        f"regexp_replace(lower(concat(lpad(hex({high}), 16, '0'), lpad(hex({low}), 16, '0'))),"
        " '^(.{8})(.{4})(.{4})(.{4})(.{12})$', '$1-$2-$3-$4-$5')"
    )


def transaction_uuid_sql(database_id: int) -> str:
    """A transaction's uuid over the transactions table's `txn_id` and `started_at`."""
    return naksha_uuid_sql("`txn_id`", "`started_at`", TRANSACTION, database_id)


def database_id_sql(uuid: str) -> str:
    """The database id a uuid (a SQL expression of its text) carries: its low 40 bits."""
    return f"cast(conv(substr(replace({uuid}, '-', ''), 23, 10), 16, 10) as bigint)"


def database_id_of_uuid(uuid: str) -> int | None:
    """The same in Python (None for text that is no such uuid)."""
    digits = uuid.replace("-", "")
    return int(digits[-10:], 16) if len(digits) == 32 and all(c in "0123456789abcdefABCDEF" for c in digits) else None
