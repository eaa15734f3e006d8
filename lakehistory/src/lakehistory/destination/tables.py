"""The destination's record of each table Fivetran created: its columns with Fivetran's types, its
key, and whether Fivetran writes it in history mode. `CreateTable` writes it, `AlterTable` adds to
it, `DescribeTable` answers from it, and every write request is checked against it.

A record lives beside the landing, never in it (a table's folder holds batch folders only):
`<landing root>/.lakehistory/tables/<schema>/<table>.json`, written whole (store.Store.write_text)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from lakehistory.names import ACTIVE, EARLIEST, END, STAGING_PREFIX, START, SYNCED

from .store import Store

STATE = ".lakehistory"  # beside the schemas' folders in the landing root; no schema is named so
FIVETRAN_ID = "_fivetran_id"
HISTORY_SYSTEM = (START, END, ACTIVE)
# A name the destination makes a folder of: no separator, no `..`, nothing a glob or URL reads.
PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]*$")

# Each Fivetran type as one Spark type (docs/landing-format.md "Fivetran's types"). BINARY stays
# the base64 text Fivetran sends (`unbase64()` gives the bytes); NAIVE_TIME stays `HH:mm:ss` text,
# as Spark before 4.1 has no time of day.
SPARK_TYPES = {
    "UNSPECIFIED": "string",
    "BOOLEAN": "boolean",
    "SHORT": "smallint",
    "INT": "int",
    "LONG": "bigint",
    "FLOAT": "float",
    "DOUBLE": "double",
    "NAIVE_DATE": "date",
    "NAIVE_DATETIME": "timestamp_ntz",
    "UTC_DATETIME": "timestamp",
    "BINARY": "string",
    "XML": "string",
    "STRING": "string",
    "JSON": "string",
    "NAIVE_TIME": "string",
}
DEFAULT_DECIMAL = (38, 10)  # a DECIMAL without precision and scale


class TableError(Exception):
    """A request the destination refuses; the message names the schema, table and column."""


@dataclass(frozen=True)
class ColumnRecord:
    name: str
    type: str  # Fivetran's DataType name
    primary_key: bool = False
    precision: int | None = None
    scale: int | None = None
    string_byte_length: int | None = None
    dropped: bool = False  # AlterTable left it out: its values end there, and the column stays

    @property
    def spark_type(self) -> str:
        if self.type == "DECIMAL":
            precision, scale = DEFAULT_DECIMAL if self.precision is None else (self.precision, self.scale or 0)
            return f"decimal({precision},{scale})"
        return SPARK_TYPES[self.type]


@dataclass
class TableRecord:
    schema: str
    name: str
    columns: list[ColumnRecord]
    last_sequence: int = 0
    created_at: str = ""

    @property
    def history_mode(self) -> bool:
        """Fivetran writes the table in history mode: it created it with `_fivetran_start`."""
        return any(c.name == START for c in self.columns)

    @property
    def key(self) -> list[str]:
        """The source's primary key (`_fivetran_start` aside); `_fivetran_id` for a table without one."""
        key = [c.name for c in self.columns if c.primary_key and c.name != START]
        if not key and any(c.name == FIVETRAN_ID for c in self.columns):
            key = [FIVETRAN_ID]
        return key

    @property
    def data_columns(self) -> list[ColumnRecord]:
        """The columns a history table keeps as data: every one but Fivetran's history columns."""
        return [c for c in self.columns if c.name not in (*HISTORY_SYSTEM, SYNCED)]

    def column(self, name: str) -> ColumnRecord | None:
        return next((c for c in self.columns if c.name == name), None)


def check_columns(record: TableRecord) -> None:
    """Refuse a column the landing cannot carry: a name staging gives its own columns."""
    for c in record.columns:
        if c.name.lower().startswith(STAGING_PREFIX) or c.name.lower() == EARLIEST:
            raise TableError(
                f"table {record.schema}.{record.name}: column {c.name!r} has a name lakehistory keeps for its own "
                f"columns ({STAGING_PREFIX}*, {EARLIEST}); rename it in the connector's schema"
            )


def plain_name(kind: str, name: str) -> str:
    if not PLAIN.match(name) or name == STATE:
        raise TableError(
            f"{kind} {name!r}: the destination names folders after schemas and tables, so a name holds "
            "only letters, digits and _ . = - and does not begin with a dot or a dash"
        )
    return name


def record_path(store: Store, schema: str, table: str) -> str:
    return store.path(STATE, "tables", plain_name("schema", schema), f"{plain_name('table', table)}.json")


def read_record(store: Store, schema: str, table: str) -> TableRecord | None:
    text = store.read_text(record_path(store, schema, table))
    if text is None:
        return None
    data = json.loads(text)
    columns = [ColumnRecord(**c) for c in data.pop("columns")]
    return TableRecord(columns=columns, **data)


def write_record(store: Store, record: TableRecord) -> None:
    store.write_text(record_path(store, record.schema, record.name), json.dumps(asdict(record), indent=1))


def schema_folder(store: Store, schema: str) -> str:
    """The folder of one Fivetran schema's tables: the landing root of the dbt source that reads them."""
    return store.path(plain_name("schema", schema))
