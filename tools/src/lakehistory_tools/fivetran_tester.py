"""A client that speaks to a destination as Fivetran does: it reads input files in the format of
Fivetran's destination tester (fivetran/fivetran_sdk, tools/destination-connector-tester/README.md),
writes each operation's batch files as Fivetran writes them (CSV as Jackson writes it, zstd, each
file encrypted with AES-256-CBC under a key of its own, its IV first) and sends the requests over
gRPC.

    python -m lakehistory_tools.fivetran_tester INPUT [INPUT ...] --landing-root ROOT
        [--port 50052] [--schema tester] [--plain-text]

An input file is a JSON object whose keys are taken in order: `create_table` and `alter_table`
(tables by name: `columns` name -> type, or {"type": "DECIMAL", "precision": p, "scale": s};
`primary_key`; `history_mode`), `describe_table` (names), and `ops`, a list of operations each
sent as one request per table: `upsert`, `update`, `delete`, `soft_delete` (rows; `op_time` is a
history-mode row's source time) and `truncate_before`, `soft_truncate_before` (table names).

The client is Fivetran's side only: it keeps its own clock of syncs (each operation one second
after the last), and what it sent (`Sent`) for a test to compare the destination's tables with.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import zstandard
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from google.protobuf.timestamp_pb2 import Timestamp

from lakehistory.destination.sdk import common_pb2 as common
from lakehistory.destination.sdk import destination_sdk_pb2 as sdk
from lakehistory.destination.sdk import destination_sdk_pb2_grpc as sdk_grpc

START, END, ACTIVE, SYNCED = "_fivetran_start", "_fivetran_end", "_fivetran_active", "_fivetran_synced"
DELETED, FIVETRAN_ID = "_fivetran_deleted", "_fivetran_id"
OPEN_END = "9999-12-31T23:59:59.999Z"
NULL_STRING, UNMODIFIED_STRING = "null-string", "unmodified-string"  # noqa: S105 - tokens, not secrets
ROW_OPERATIONS = ("upsert", "update", "delete", "soft_delete")
TRUNCATES = ("truncate_before", "soft_truncate_before")


@dataclass
class TableDef:
    name: str
    columns: dict[str, dict[str, Any]]  # name -> {"type": ..., "precision": ..., "scale": ...}
    primary_key: list[str]
    history_mode: bool

    @classmethod
    def parse(cls, name: str, spec: dict[str, Any]) -> TableDef:
        columns = {c: t if isinstance(t, dict) else {"type": t} for c, t in spec["columns"].items()}
        return cls(name, columns, list(spec.get("primary_key", [])), bool(spec.get("history_mode", False)))

    @property
    def key(self) -> list[str]:
        return self.primary_key or [FIVETRAN_ID]

    def all_columns(self) -> dict[str, dict[str, Any]]:
        """The table as Fivetran creates it: the source's columns and Fivetran's own."""
        columns = dict(self.columns)
        if not self.primary_key:
            columns = {FIVETRAN_ID: {"type": "STRING"}, **columns}
        if self.history_mode:
            columns |= {START: {"type": "UTC_DATETIME"}, END: {"type": "UTC_DATETIME"}, ACTIVE: {"type": "BOOLEAN"}}
        else:
            columns[DELETED] = {"type": "BOOLEAN"}
        columns[SYNCED] = {"type": "UTC_DATETIME"}
        return columns

    def message(self) -> common.Table:
        columns = []
        for name, t in self.all_columns().items():
            params = None
            if t["type"] == "DECIMAL" and "precision" in t:
                params = common.DataTypeParams(
                    decimal=common.DecimalParams(precision=t["precision"], scale=t.get("scale", 0))
                )
            key = name in self.key or (self.history_mode and name == START)
            columns.append(
                common.Column(name=name, type=common.DataType.Value(t["type"]), primary_key=key, params=params)
            )
        return common.Table(name=self.name, columns=columns)


@dataclass
class Sent:
    """One request as sent: for a write, the rows of each file kind (JSON values, tokens as
    None for NULL and UNMODIFIED for the unmodified string)."""

    request: str  # WriteHistoryBatch, WriteBatch, Truncate, AlterTable, CreateTable, DescribeTable
    table: str
    synced: dt.datetime
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    soft: bool = False
    definition: TableDef | None = None  # CreateTable, AlterTable: the table as asked
    response: Any = None


UNMODIFIED = object()


def text(value: Any, type_: str) -> str:
    """A value as Fivetran's CSV holds it."""
    if value is None:
        return NULL_STRING
    if value is UNMODIFIED:
        return UNMODIFIED_STRING
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, bool):
        return "true" if value else "false"
    if type_ == "JSON" and not isinstance(value, str):
        return json.dumps(value)
    return str(value)


def csv_bytes(header: Sequence[str], rows: Sequence[dict[str, Any]], types: dict[str, str]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")  # quotes doubled, no escape character: as Jackson
    writer.writerow(header)
    for row in rows:
        writer.writerow([text(row.get(c), types.get(c, "STRING")) for c in header])
    return out.getvalue().encode("utf-8")


def sealed(plain: bytes, key: bytes) -> bytes:
    """zstd, then AES-256-CBC: a batch file as Fivetran writes it."""
    return encrypted(zstandard.ZstdCompressor().compress(plain), key)


def encrypted(data: bytes, key: bytes) -> bytes:
    """AES-256-CBC with PKCS5 padding, a random IV first."""
    padder = padding.PKCS7(algorithms.AES.block_size).padder()
    iv = os.urandom(16)
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    padded = padder.update(data) + padder.finalize()
    return iv + encryptor.update(padded) + encryptor.finalize()


def utc(text_: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text_.replace("Z", "+00:00")).astimezone(dt.UTC)


def timestamp(moment: dt.datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


class FivetranConnection:
    """Fivetran's side of a connection to one destination."""

    def __init__(
        self,
        channel: grpc.Channel,
        configuration: dict[str, str],
        schema: str = "tester",
        plain_text: bool = False,
        clock: dt.datetime | None = None,
    ) -> None:
        self.stub = sdk_grpc.DestinationConnectorStub(channel)
        self.configuration, self.schema, self.plain_text = configuration, schema, plain_text
        self.tables: dict[str, TableDef] = {}
        self.sent: list[Sent] = []
        now = clock or dt.datetime.now(dt.UTC)
        self.clock = now.replace(microsecond=now.microsecond // 1000 * 1000)
        self.files = Path(tempfile.mkdtemp(prefix="fivetran-batches-"))

    def tick(self) -> dt.datetime:
        self.clock += dt.timedelta(seconds=1)
        return self.clock

    # --- input files ----------------------------------------------------------------------------

    def run_file(self, path: Path) -> None:
        for section, body in json.loads(path.read_text()).items():
            if section in ("create_table", "alter_table"):
                for name, spec in body.items():
                    self.define(section, TableDef.parse(name, spec))
            elif section == "describe_table":
                for name in body:
                    self.describe(name)
            elif section == "ops":
                for op in body:
                    self.operation(op)
            else:
                raise ValueError(f"{path}: unknown section {section!r}")

    def define(self, section: str, table: TableDef) -> Any:
        if section == "alter_table" and table.name in self.tables:
            table.history_mode = self.tables[table.name].history_mode
        self.tables[table.name] = table
        request = sdk.CreateTableRequest if section == "create_table" else sdk.AlterTableRequest
        call = self.stub.CreateTable if section == "create_table" else self.stub.AlterTable
        response = call(request(configuration=self.configuration, schema_name=self.schema, table=table.message()))
        name = "CreateTable" if section == "create_table" else "AlterTable"
        self.sent.append(Sent(name, table.name, self.clock, definition=table, response=response))
        return response

    def describe(self, name: str) -> Any:
        request = sdk.DescribeTableRequest(configuration=self.configuration, schema_name=self.schema, table_name=name)
        response = self.stub.DescribeTable(request)
        self.sent.append(Sent("DescribeTable", name, self.clock, response=response))
        return response

    def operation(self, op: dict[str, Any]) -> None:
        synced = self.tick()
        for kind, body in op.items():
            if kind in TRUNCATES:
                for name in body:
                    self.truncate(name, synced, soft=kind == "soft_truncate_before")
            elif kind in ROW_OPERATIONS:
                for name, rows in body.items():
                    self.write(name, kind, rows, synced)
            else:
                raise ValueError(f"unknown operation {kind!r}")

    # --- requests -------------------------------------------------------------------------------

    def truncate(self, name: str, before: dt.datetime, soft: bool) -> Any:
        request = sdk.TruncateRequest(
            configuration=self.configuration,
            schema_name=self.schema,
            table_name=name,
            synced_column=SYNCED,
            utc_delete_before=timestamp(before),
            soft=sdk.SoftTruncate(deleted_column=DELETED) if soft else None,
        )
        response = self.stub.Truncate(request)
        self.sent.append(Sent("Truncate", name, before, soft=soft, response=response))
        return response

    def write(self, name: str, kind: str, rows: list[dict[str, Any]], synced: dt.datetime) -> Any:
        table = self.tables[name]
        files = (
            history_files(table, kind, rows, synced) if table.history_mode else live_files(table, kind, rows, synced)
        )
        return self.send(table, files, synced)

    def send(self, table: TableDef, files: dict[str, list[dict[str, Any]]], synced: dt.datetime, **tamper: Any) -> Any:
        """Write the files and send the request. `tamper` (tests): `keys` or `data`, by file kind, to
        send another key (None: none) or other bytes than Fivetran would."""
        request = self.request(table, files, **tamper)
        if table.history_mode:
            response, name = self.stub.WriteHistoryBatch(request), "WriteHistoryBatch"
        else:
            response, name = self.stub.WriteBatch(request), "WriteBatch"
        self.sent.append(Sent(name, table.name, synced, files=files, response=response))
        return response

    def request(self, table: TableDef, files: dict[str, list[dict[str, Any]]], **tamper: Any) -> Any:
        """The files written as Fivetran writes them, and the request that names them."""
        types = {c: t["type"] for c, t in table.all_columns().items()}
        paths: dict[str, list[str]] = {}
        keys: dict[str, bytes] = {}
        for kind, rows in files.items():
            if not rows:
                continue
            header = header_of(table, kind)
            plain = csv_bytes(header, rows, types)
            key = secrets.token_bytes(32)
            path = self.files / f"{table.name}_{kind}_{secrets.token_hex(6)}.csv{'' if self.plain_text else '.zst.aes'}"
            data = plain if self.plain_text else sealed(plain, key)
            path.write_bytes(tamper.get("data", {}).get(kind, data))
            paths.setdefault(kind, []).append(str(path))
            sent_key = tamper.get("keys", {}).get(kind, key)
            if sent_key is not None:
                keys[str(path)] = sent_key
        params = sdk.FileParams(
            compression=sdk.OFF if self.plain_text else sdk.ZSTD,
            encryption=sdk.NONE if self.plain_text else sdk.AES,
            null_string=NULL_STRING,
            unmodified_string=UNMODIFIED_STRING,
        )
        common_args: dict[str, Any] = {
            "configuration": self.configuration,
            "schema_name": self.schema,
            "table": table.message(),
            "keys": {} if self.plain_text else keys,
            "replace_files": paths.get("replace", []),
            "update_files": paths.get("update", []),
            "delete_files": paths.get("delete", []),
            "file_params": params,
        }
        if table.history_mode:
            return sdk.WriteHistoryBatchRequest(earliest_start_files=paths.get("earliest", []), **common_args)
        return sdk.WriteBatchRequest(**common_args)


def header_of(table: TableDef, kind: str) -> list[str]:
    columns = list(table.all_columns())
    if kind == "earliest":
        return [*table.key, START]
    return columns


def history_files(
    table: TableDef, kind: str, rows: list[dict[str, Any]], synced: dt.datetime
) -> dict[str, list[dict[str, Any]]]:
    """One operation of a history-mode table as Fivetran sends it: each row a version starting at
    its `op_time`; the versions of one key chained (each ends 1 ms before the next); every key's
    earliest start in the earliest-start file. A delete (hard or soft) ends the key's version."""
    if kind in ("delete", "soft_delete"):
        deletes = [{**_keyed(table, r), END: utc(r["op_time"]) if "op_time" in r else synced} for r in rows]
        return {"delete": deletes}
    versions = sorted(rows, key=lambda r: r.get("op_time", ""))
    out: list[dict[str, Any]] = []
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in versions:
        start = utc(r["op_time"]) if "op_time" in r else synced
        row = {c: r.get(c, UNMODIFIED if kind == "update" else None) for c in table.columns}
        row.update(_keyed(table, r))
        row |= {START: start, END: utc(OPEN_END), ACTIVE: True, SYNCED: synced}
        key = tuple(row[k] for k in table.key)
        if key in last:
            last[key][END] = start - dt.timedelta(milliseconds=1)
            last[key][ACTIVE] = False
        last[key] = row
        out.append(row)
    earliest: dict[tuple[Any, ...], dt.datetime] = {}
    for row in out:
        key = tuple(row[k] for k in table.key)
        earliest[key] = min(earliest.get(key, row[START]), row[START])
    return {
        "replace" if kind == "upsert" else "update": out,
        "earliest": [{**dict(zip(table.key, k)), START: s} for k, s in earliest.items()],
    }


def live_files(
    table: TableDef, kind: str, rows: list[dict[str, Any]], synced: dt.datetime
) -> dict[str, list[dict[str, Any]]]:
    """One operation of a live table as Fivetran sends it: one row per key (the last wins), each
    with the sync's time; a soft delete is an update that sets `_fivetran_deleted`."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        by_key[tuple(_keyed(table, r)[k] for k in table.key)] = r
    out = []
    for r in by_key.values():
        if kind == "delete":
            out.append({**{c: None for c in table.all_columns()}, **_keyed(table, r), SYNCED: synced})
            continue
        missing = UNMODIFIED if kind in ("update", "soft_delete") else None
        row = {c: r.get(c, missing) for c in table.columns}
        row.update(_keyed(table, r))
        row[DELETED] = {"upsert": False, "update": UNMODIFIED, "soft_delete": True}[kind]
        row[SYNCED] = synced
        out.append(row)
    file_kind = {"upsert": "replace", "update": "update", "soft_delete": "update", "delete": "delete"}[kind]
    return {file_kind: out}


def _keyed(table: TableDef, row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in table.key}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lakehistory_tools.fivetran_tester",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUT", help="input files, or folders of them")
    p.add_argument("--landing-root", required=True, help="the destination's landing root (its setup form)")
    p.add_argument("--port", type=int, default=50052)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--schema", default="tester")
    p.add_argument("--plain-text", action="store_true", help="send files neither compressed nor encrypted")
    args = p.parse_args(argv)
    with grpc.insecure_channel(f"{args.host}:{args.port}") as channel:
        tester = FivetranConnection(channel, {"landing_root": args.landing_root}, args.schema, args.plain_text)
        for path in input_files(args.inputs):
            before = len(tester.sent)
            tester.run_file(path)
            print(f"{path.name}: {len(tester.sent) - before} requests sent")
    failed = [s for s in tester.sent if s.response.WhichOneof("response") in ("task", "warning")]
    for s in failed:
        print(f"{s.request} {s.table}: {s.response}")
    return 1 if failed else 0


def input_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        yield from sorted(path.glob("*.json")) if path.is_dir() else [path]


if __name__ == "__main__":
    raise SystemExit(main())
