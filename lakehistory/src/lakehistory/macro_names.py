"""The names the macros share with the engine, written as a macro: `macros/internal/names.sql`.

    python -m lakehistory.macro_names          # rewrites the file after a change to names.py

The macros read every column name the product and the protocol share, the open ends and the
transactions table's columns from `lakehistory._names()`, a file generated from `names.py` and
the transactions layout, so that each name is declared once, in Python. It is a file rather than
a call to the engine because dbt renders the macros at parse time too, before any Spark session;
`tests/test_door.py` fails when the file is not what this module writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakehistory import names
from lakehistory.history.transactions import TABLE_COLUMNS as TRANSACTION_COLUMNS

MACRO_FILE = Path("macros") / "internal" / "names.sql"


def shared_names() -> dict[str, Any]:
    return {
        "fivetran_system": list(names.FIVETRAN_SYSTEM),
        "start": names.START,
        "end": names.END,
        "active": names.ACTIVE,
        "synced": names.SYNCED,
        "valid_from": names.VALID_FROM,
        "valid_to": names.VALID_TO,
        "removal": names.REMOVAL,
        "txn_id": names.TXN_ID,
        "history_system": list(names.HISTORY_SYSTEM),
        "reserved": {kind: list(columns) for kind, columns in names.RESERVED.items()},
        "end_of_time": dict(names.END_OF_TIME),
        "fivetran_end_of_time": names.FIVETRAN_END_OF_TIME,
        "transaction_columns": list(TRANSACTION_COLUMNS),
    }


def macro_text() -> str:
    body = json.dumps(shared_names(), indent=2).replace("\n", "\n  ")
    return (
        "{#- Written by `python -m lakehistory.macro_names` from lakehistory/src/lakehistory/names.py and the\n"
        "    transactions layout: edit those, not this file (lakehistory/tests/test_door.py checks it). -#}\n"
        "{% macro _names() %}\n"
        f"  {{{{ return({body}) }}}}\n"
        "{% endmacro %}\n"
    )


def main() -> None:
    root = Path(__file__).resolve().parents[3]
    (root / MACRO_FILE).write_text(macro_text())
    print(f"wrote {MACRO_FILE}")


if __name__ == "__main__":
    main()
