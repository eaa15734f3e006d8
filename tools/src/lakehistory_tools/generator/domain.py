"""The demo domain as data: the CRMP climate-station tables (seed 003, PCIC pycds).

Five source tables, parents first. Each definition names its columns with Spark SQL types, its
key, its foreign keys and which columns may be NULL, so the generator, the dbt models (sources,
staging casts, `_hx` history foreign keys) and the tests all read one definition.

    >>> from lakehistory_tools.generator.domain import TABLES, get_table
    >>> get_table("obs_raw").foreign_keys[0].ref_table
    'meta_history'

`python -m lakehistory_tools.generator.domain` (or `lakehistory domain`) prints it as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakehistory.landing.batch import Column


@dataclass(frozen=True)
class ForeignKey:
    """`columns` of the child reference `ref_columns` (the key) of `ref_table`."""

    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]

    @property
    def hx_column(self) -> str:
        """The history foreign key of the `_hx` dialect: `<ref_table>_hx_id` (seed 003 naming)."""
        return hx_id_column(self.ref_table)


@dataclass(frozen=True)
class TableDef:
    name: str
    columns: tuple[Column, ...]  # key and data columns in table order (no system columns)
    key: tuple[str, ...]
    foreign_keys: tuple[ForeignKey, ...] = ()
    nullable: frozenset = frozenset()
    description: str = ""
    column_descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def data_columns(self) -> tuple[str, ...]:
        """Non-key columns, in table order."""
        return tuple(c.name for c in self.columns if c.name not in self.key)

    @property
    def types(self) -> dict[str, str]:
        return {c.name: c.type for c in self.columns}

    @property
    def hx_table(self) -> str:
        return hx_table(self.name)

    @property
    def hx_id(self) -> str:
        return hx_id_column(self.name)

    def fk_for(self, column: str) -> ForeignKey | None:
        for fk in self.foreign_keys:
            if column in fk.columns:
                return fk
        return None

    def ddl_columns(self) -> str:
        """`name type [NOT NULL], ...` for a Spark `CREATE TABLE`."""
        return ", ".join(f"{c.name} {c.type}" + ("" if c.name in self.nullable else " NOT NULL") for c in self.columns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "key": list(self.key),
            "columns": [
                {
                    "name": c.name,
                    "type": c.type,
                    "nullable": c.name in self.nullable,
                    "description": self.column_descriptions.get(c.name, ""),
                }
                for c in self.columns
            ],
            "foreign_keys": [
                {
                    "columns": list(fk.columns),
                    "ref_table": fk.ref_table,
                    "ref_columns": list(fk.ref_columns),
                    "hx_column": fk.hx_column,
                }
                for fk in self.foreign_keys
            ],
            "hx_table": self.hx_table,
            "hx_id": self.hx_id,
        }


def hx_table(table: str) -> str:
    """`xxx` -> `xxx_hx` (seed 003)."""
    return f"{table}_hx"


def hx_id_column(table: str) -> str:
    """`xxx` -> `xxx_hx_id`: the full table name, not the key's name (seed 003)."""
    return f"{table}_hx_id"


def _cols(*pairs: tuple[str, str]) -> tuple[Column, ...]:
    return tuple(Column(n, t) for n, t in pairs)


META_NETWORK = TableDef(
    name="meta_network",
    columns=_cols(
        ("network_id", "bigint"),
        ("network_name", "string"),
        ("description", "string"),
        ("virtual", "string"),
        ("publish", "boolean"),
        ("col_hex", "string"),
    ),
    key=("network_id",),
    nullable=frozenset({"description", "virtual", "col_hex"}),
    description="Observing networks (agencies) that contribute stations to the CRMP.",
    column_descriptions={
        "network_id": "Network identifier.",
        "network_name": "Short name of the network, e.g. EC, MoTIe, FLNRO-WMB.",
        "description": "Long name of the operating agency.",
        "virtual": "Name of the network this one is derived from, if it is a virtual network.",
        "publish": "Whether the network's data are published.",
        "col_hex": "Map colour of the network's stations (#RRGGBB).",
    },
)

META_STATION = TableDef(
    name="meta_station",
    columns=_cols(
        ("station_id", "bigint"),
        ("native_id", "string"),
        ("network_id", "bigint"),
        ("min_obs_time", "timestamp"),
        ("max_obs_time", "timestamp"),
        ("publish", "boolean"),
    ),
    key=("station_id",),
    foreign_keys=(ForeignKey(("network_id",), "meta_network", ("network_id",)),),
    nullable=frozenset({"min_obs_time", "max_obs_time"}),
    description="Stations: one physical station of one network, identified in it by its native id.",
    column_descriptions={
        "station_id": "Station identifier.",
        "native_id": "The network's own identifier of the station (e.g. an EC climate id).",
        "network_id": "The network operating the station.",
        "min_obs_time": "Time of the station's first observation (NULL until it reports).",
        "max_obs_time": "Time of the station's latest observation (NULL until it reports).",
        "publish": "Whether the station's data are published.",
    },
)

META_HISTORY = TableDef(
    name="meta_history",
    columns=_cols(
        ("history_id", "bigint"),
        ("station_id", "bigint"),
        ("station_name", "string"),
        ("lon", "double"),
        ("lat", "double"),
        ("elev", "double"),
        ("sdate", "date"),
        ("edate", "date"),
        ("province", "string"),
        ("country", "string"),
        ("freq", "string"),
    ),
    key=("history_id",),
    foreign_keys=(ForeignKey(("station_id",), "meta_station", ("station_id",)),),
    nullable=frozenset({"station_name", "lon", "lat", "elev", "sdate", "edate", "province", "country", "freq"}),
    description="Station history (CRMP sense): name, location and reporting frequency of a station over a "
    "period; a station that moves gets a new row and the old one an end date.",
    column_descriptions={
        "history_id": "Station-history identifier.",
        "station_id": "The station this period belongs to.",
        "station_name": "Name of the station during the period.",
        "lon": "Longitude, decimal degrees (WGS 84).",
        "lat": "Latitude, decimal degrees (WGS 84).",
        "elev": "Elevation in metres (NULL when unknown).",
        "sdate": "First day of the period.",
        "edate": "Last day of the period (NULL while current).",
        "province": "Province or territory code (BC, AB, YT, ...).",
        "country": "Country code (CA).",
        "freq": "Reporting frequency: 1-hour, 12-hour, daily or irregular.",
    },
)

META_VARS = TableDef(
    name="meta_vars",
    columns=_cols(
        ("vars_id", "bigint"),
        ("network_id", "bigint"),
        ("net_var_name", "string"),
        ("standard_name", "string"),
        ("cell_method", "string"),
        ("unit", "string"),
        ("precision", "double"),
        ("display_name", "string"),
    ),
    key=("vars_id",),
    foreign_keys=(ForeignKey(("network_id",), "meta_network", ("network_id",)),),
    nullable=frozenset({"unit", "precision"}),
    description="Variables a network reports, with CF standard names and cell methods.",
    column_descriptions={
        "vars_id": "Variable identifier.",
        "network_id": "The network that reports the variable under its own name.",
        "net_var_name": "The network's name of the variable (e.g. MAX_TEMP, ONE_DAY_PRECIPITATION).",
        "standard_name": "CF standard name (air_temperature, precipitation_amount, ...).",
        "cell_method": "CF cell method (time: point, time: maximum, time: sum, ...).",
        "unit": "Unit of the values (celsius, mm, cm, %, km/h, ...).",
        "precision": "Resolution of the values in `unit`.",
        "display_name": "Human-readable name for maps and downloads.",
    },
)

OBS_RAW = TableDef(
    name="obs_raw",
    columns=_cols(
        ("obs_raw_id", "bigint"),
        ("history_id", "bigint"),
        ("vars_id", "bigint"),
        ("obs_time", "timestamp"),
        ("datum", "double"),
    ),
    key=("obs_raw_id",),
    foreign_keys=(
        ForeignKey(("history_id",), "meta_history", ("history_id",)),
        ForeignKey(("vars_id",), "meta_vars", ("vars_id",)),
    ),
    nullable=frozenset({"datum"}),
    description="Raw observations: one value of one variable at one station-history at one time.",
    column_descriptions={
        "obs_raw_id": "Observation identifier.",
        "history_id": "The station history (station at its location then) that observed the value.",
        "vars_id": "The variable observed.",
        "obs_time": "Time of observation (UTC).",
        "datum": "The observed value in the variable's unit (NULL when missing or withdrawn by QA).",
    },
)

TABLES: tuple[TableDef, ...] = (META_NETWORK, META_STATION, META_HISTORY, META_VARS, OBS_RAW)
"""All tables, parents before children."""

TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLES)
TABLES_BY_NAME: dict[str, TableDef] = {t.name: t for t in TABLES}


def get_table(name: str) -> TableDef:
    try:
        return TABLES_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; the demo tables are {', '.join(TABLE_NAMES)}") from None


def children_of(name: str) -> list[tuple[TableDef, ForeignKey]]:
    """(child table, foreign key) pairs that reference `name`."""
    return [(t, fk) for t in TABLES for fk in t.foreign_keys if fk.ref_table == name]


def domain_as_dict() -> dict[str, Any]:
    return {"tables": [t.to_dict() for t in TABLES]}


def domain_json(indent: int = 2) -> str:
    return json.dumps(domain_as_dict(), indent=indent)


if __name__ == "__main__":  # pragma: no cover
    print(domain_json())
