"""`DestinationConnector`, Fivetran's Partner SDK v2 service, answered by landing batches.

Fivetran (the client) names the landing root in each request's configuration (the setup form's
`landing_root`) and the schema in the request; each schema's tables land in `<landing root>/<schema>/`,
the landing root of the dbt source that reads them. A request the destination refuses (an unknown
table, a file that does not decrypt, a column the table does not have) gets a `Task` naming the
table, file and column, and lands nothing; Fivetran stops the sync and shows it. A failure of the
server itself is a gRPC error. The log holds requests, tables, counts and times: never a value or a
key."""

from __future__ import annotations

import datetime as dt
import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import urlparse

import grpc

from .batches import BatchFile, Lander, refused
from .files import FileParams
from .sdk import common_pb2 as common
from .sdk import destination_sdk_pb2 as sdk
from .sdk import destination_sdk_pb2_grpc as sdk_grpc
from .store import Store, StoreError
from .tables import PLAIN, SPARK_TYPES, STATE, ColumnRecord, TableError, TableRecord, read_record

LANDING_ROOT, SPARK_REMOTE = "landing_root", "spark_remote"
COMPRESSIONS = {sdk.OFF: "off", sdk.ZSTD: "zstd", sdk.GZIP: "gzip"}
Response = TypeVar("Response")


def log(level: str, message: str) -> None:
    """One line of Fivetran's log format on stdout."""
    line = {"level": level, "message": message, "message-origin": "sdk_destination"}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def configuration_form() -> common.ConfigurationFormResponse:
    return common.ConfigurationFormResponse(
        schema_selection_supported=True,
        table_selection_supported=True,
        fields=[
            common.FormField(
                name=LANDING_ROOT,
                label="Landing root",
                required=True,
                description=(
                    "Where the batches land: a folder of the machine that runs the destination, or "
                    "s3a://bucket/prefix. Each schema's tables land in <landing root>/<schema>, the "
                    "landing_root of the dbt source that reads them."
                ),
                text_field=common.PlainText,
                placeholder="/data/landing",
            ),
            common.FormField(
                name=SPARK_REMOTE,
                label="Spark Connect server (optional)",
                required=False,
                description="The Spark Connect server dbt builds the history on; the test checks that it answers.",
                text_field=common.PlainText,
                placeholder="sc://spark.internal:15002",
            ),
        ],
        tests=[
            common.ConfigurationTest(name=LANDING_ROOT, label="Writing to the landing root"),
            common.ConfigurationTest(name=SPARK_REMOTE, label="Reaching the Spark Connect server"),
        ],
    )


def landing_root(configuration: Any) -> Store:
    root = configuration.get(LANDING_ROOT, "")
    if not root:
        raise TableError(f"the configuration has no {LANDING_ROOT!r}: the setup form asks for it")
    try:
        return Store(root)
    except StoreError as exc:
        raise TableError(str(exc)) from None


def check_landing_root(configuration: Any) -> str | None:
    """Why the landing root cannot take batches, or None when it can."""
    try:
        store = landing_root(configuration)
        probe = store.path(STATE, f"probe-{uuid.uuid4().hex}")
        store.write_text(probe, "")
        store.remove_file(probe)
    except TableError as exc:
        return str(exc)
    except OSError as exc:
        return f"landing root {configuration.get(LANDING_ROOT)!r} is not writable: {exc.strerror or exc}"
    return None


def check_spark(configuration: Any) -> str | None:
    """Why the Spark Connect server does not answer, or None when it does (or none is named)."""
    remote = configuration.get(SPARK_REMOTE, "")
    if not remote:
        return None
    parsed = urlparse(remote)
    if parsed.scheme != "sc" or not parsed.hostname:
        return f"{SPARK_REMOTE} {remote!r}: a Spark Connect address reads sc://host:port"
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 15002), timeout=5):
            return None
    except OSError as exc:
        return (
            f"the Spark Connect server {parsed.hostname}:{parsed.port or 15002} does not answer ({exc.strerror or exc})"
        )


def record_of(schema: str, table: common.Table) -> TableRecord:
    """The destination's record of a table as Fivetran describes it."""
    columns = []
    for c in table.columns:
        type_name = common.DataType.Name(c.type)
        if type_name not in SPARK_TYPES and type_name != "DECIMAL":
            raise TableError(f"table {schema}.{table.name}: column {c.name!r} has type {type_name}, unknown here")
        decimal = c.params.decimal if c.HasField("params") and c.params.HasField("decimal") else None
        length = (
            c.params.string_byte_length if c.HasField("params") and c.params.HasField("string_byte_length") else None
        )
        columns.append(
            ColumnRecord(
                name=c.name,
                type=type_name,
                primary_key=c.primary_key,
                precision=decimal.precision if decimal else None,
                scale=decimal.scale if decimal else None,
                string_byte_length=length,
            )
        )
    return TableRecord(schema=schema, name=table.name, columns=columns, created_at=_now())


def table_of(record: TableRecord) -> common.Table:
    columns = []
    for c in record.columns:
        params = None
        if c.precision is not None:
            params = common.DataTypeParams(decimal=common.DecimalParams(precision=c.precision, scale=c.scale or 0))
        elif c.string_byte_length is not None:
            params = common.DataTypeParams(string_byte_length=c.string_byte_length)
        columns.append(
            common.Column(name=c.name, type=common.DataType.Value(c.type), primary_key=c.primary_key, params=params)
        )
    return common.Table(name=record.name, columns=columns)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class Destination(sdk_grpc.DestinationConnectorServicer):
    """The service; one `Lander` for each landing root it is asked to write."""

    def __init__(self) -> None:
        self._landers: dict[str, Lander] = {}
        self._guard = threading.Lock()

    def lander(self, configuration: Any) -> Lander:
        root = configuration.get(LANDING_ROOT, "")
        with self._guard:
            if root not in self._landers:
                lander = Lander(landing_root(configuration))
                lander.forget_incoming()  # this server is the root's one writer: nothing of it is in flight
                self._landers[root] = lander
            return self._landers[root]

    def _answer(
        self,
        request_name: str,
        where: str,
        context: grpc.ServicerContext,
        work: Callable[[], Response],
        response: Callable[..., Response],
    ) -> Response:
        """Run one request's work; an error the sender can act on becomes a `Task` in the
        request's `response` message, logged."""
        started = time.monotonic()
        try:
            answer = work()
        except Exception as exc:
            if refused(exc):
                log("WARNING", f"{request_name} {where}: refused: {exc}")
                return response(task=common.Task(message=str(exc)))
            log("SEVERE", f"{request_name} {where}: failed: {type(exc).__name__}")
            context.abort(grpc.StatusCode.INTERNAL, f"{request_name} {where}: {type(exc).__name__}: {exc}")
        log("INFO", f"{request_name} {where}: done in {time.monotonic() - started:.3f} s")
        return answer

    # --- the setup form -------------------------------------------------------------------------

    def ConfigurationForm(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return configuration_form()

    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        return sdk.CapabilitiesResponse(batch_file_format=sdk.CSV)

    def Test(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        checks = {LANDING_ROOT: check_landing_root, SPARK_REMOTE: check_spark}
        if request.name not in checks:
            return common.TestResponse(failure=f"no test named {request.name!r}: {', '.join(checks)}")
        failure = checks[request.name](request.configuration)
        log("INFO", f"Test {request.name}: {'failed' if failure else 'passed'}")
        return common.TestResponse(failure=failure) if failure else common.TestResponse(success=True)

    # --- tables ---------------------------------------------------------------------------------

    def DescribeTable(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            store = self.lander(request.configuration).store
            record = read_record(store, request.schema_name, request.table_name)
            if record is None:
                return sdk.DescribeTableResponse(not_found=True)
            return sdk.DescribeTableResponse(table=table_of(record))

        return self._answer(
            "DescribeTable",
            f"{request.schema_name}.{request.table_name}",
            context,
            work,
            sdk.DescribeTableResponse,
        )

    def CreateTable(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            self.lander(request.configuration).create(record_of(request.schema_name, request.table))
            return sdk.CreateTableResponse(success=True)

        return self._answer(
            "CreateTable",
            f"{request.schema_name}.{request.table.name}",
            context,
            work,
            sdk.CreateTableResponse,
        )

    def AlterTable(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            added = self.lander(request.configuration).alter(record_of(request.schema_name, request.table))
            log("INFO", f"AlterTable {request.schema_name}.{request.table.name}: added {', '.join(added) or 'nothing'}")
            return sdk.AlterTableResponse(success=True)

        return self._answer(
            "AlterTable",
            f"{request.schema_name}.{request.table.name}",
            context,
            work,
            sdk.AlterTableResponse,
        )

    def Truncate(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            if request.synced_column not in ("", "_fivetran_synced"):
                raise TableError(
                    f"table {request.schema_name}.{request.table_name}: truncate by {request.synced_column!r}; "
                    "a history table's rows carry their sync time in _fivetran_synced"
                )
            before = request.utc_delete_before.ToDatetime(tzinfo=dt.UTC)
            soft = request.HasField("soft")
            self.lander(request.configuration).truncate(request.schema_name, request.table_name, before, soft)
            return sdk.TruncateResponse(success=True)

        return self._answer(
            "Truncate",
            f"{request.schema_name}.{request.table_name}",
            context,
            work,
            sdk.TruncateResponse,
        )

    # --- batches --------------------------------------------------------------------------------

    def WriteBatch(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            files = batch_files(
                request,
                ("replace", request.replace_files),
                ("update", request.update_files),
                ("delete", request.delete_files),
            )
            lander = self.lander(request.configuration)
            batch = lander.live_batch(request.schema_name, request.table.name, files, file_params(request))
            log("INFO", f"WriteBatch {request.schema_name}.{request.table.name}: batch {batch}, {len(files)} files")
            return sdk.WriteBatchResponse(success=True)

        return self._answer(
            "WriteBatch",
            f"{request.schema_name}.{request.table.name}",
            context,
            work,
            sdk.WriteBatchResponse,
        )

    def WriteHistoryBatch(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        def work() -> Any:
            files = batch_files(
                request,
                ("earliest", request.earliest_start_files),
                ("replace", request.replace_files),
                ("update", request.update_files),
                ("delete", request.delete_files),
            )
            lander = self.lander(request.configuration)
            batch = lander.history_batch(request.schema_name, request.table.name, files, file_params(request))
            log(
                "INFO",
                f"WriteHistoryBatch {request.schema_name}.{request.table.name}: batch {batch}, {len(files)} files",
            )
            return sdk.WriteBatchResponse(success=True)

        return self._answer(
            "WriteHistoryBatch",
            f"{request.schema_name}.{request.table.name}",
            context,
            work,
            sdk.WriteBatchResponse,
        )


def file_params(request: Any) -> FileParams:
    p = request.file_params
    return FileParams(
        compression=COMPRESSIONS.get(p.compression, "off"),
        encrypted=p.encryption == sdk.AES,
        null_string=p.null_string,
        unmodified_string=p.unmodified_string,
    )


def batch_files(request: Any, *kinds: tuple[str, Iterable[str]]) -> list[BatchFile]:
    """The request's files with their kinds and keys; an encrypted file without a key is refused."""
    encrypted = request.file_params.encryption == sdk.AES
    table = f"table {request.schema_name}.{request.table.name}"
    if not PLAIN.match(request.table.name or "-"):
        raise TableError(f"{table}: a table name holds only letters, digits and _ . = -")
    files = []
    for kind, paths in kinds:
        for path in paths:
            key = request.keys.get(path) if encrypted else None
            if encrypted and key is None:
                raise TableError(f"{table}: the request gives no key for its {kind} file {path}")
            files.append(BatchFile(kind, path, key))
    return files
