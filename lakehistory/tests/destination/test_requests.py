"""The destination's answers to each request, on a server in this process: what it lands, what it
refuses (and that a refused request lands nothing), retries, concurrent tables, the setup form's
tests and the health check. No Spark: the landing is read as files."""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zstandard
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lakehistory.destination.sdk import common_pb2 as common
from lakehistory.destination.sdk import destination_sdk_pb2 as sdk
from lakehistory.destination.sdk import destination_sdk_pb2_grpc as sdk_grpc
from lakehistory.destination.server import Server
from lakehistory_tools.fivetran_tester import FivetranConnection, TableDef, encrypted, history_files, live_files

T0 = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
ORDERS = TableDef("orders", {"id": {"type": "LONG"}, "note": {"type": "STRING"}}, ["id"], history_mode=True)
CLICKS = TableDef("clicks", {"id": {"type": "INT"}, "page": {"type": "STRING"}}, ["id"], history_mode=False)


def rows(n: int, start: int = 0) -> list[dict]:
    return [
        {"id": i, "note": f"note {i}", "op_time": f"2024-06-01T00:00:{i % 60:02d}Z"} for i in range(start, start + n)
    ]


def batch_folders(landing: Path, table: str) -> list[str]:
    folder = landing / "tester" / table
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def answer(response) -> tuple[str, str]:
    which = response.WhichOneof("response")
    value = getattr(response, which)
    return which, value.message if which in ("task", "warning") else str(value)


def incoming(landing: Path) -> list[Path]:
    folder = landing / ".lakehistory" / "incoming"
    return list(folder.iterdir()) if folder.exists() else []


@pytest.fixture
def orders(tester: FivetranConnection) -> TableDef:
    assert answer(tester.define("create_table", ORDERS)) == ("success", "True")
    return ORDERS


def test_a_history_batch_lands_whole_with_its_files_as_they_came(tester, landing, orders) -> None:
    assert answer(tester.send(orders, history_files(orders, "upsert", rows(3), T0), T0)) == ("success", "True")
    [batch] = batch_folders(landing, "orders")
    manifest = json.loads((landing / "tester" / "orders" / batch / "manifest.json").read_text())
    assert manifest["sequence"] == 1 and manifest["batch_id"] == batch and manifest["key"] == ["id"]
    assert (manifest["null_string"], manifest["unmodified_string"]) == ("null-string", "unmodified-string")
    assert manifest["files"] == [
        {"kind": "earliest", "path": "earliest_0.csv.zst"},
        {"kind": "replace", "path": "replace_0.csv.zst"},
    ]
    replace = landing / "tester" / "orders" / batch / "replace_0.csv.zst"
    text = zstandard.ZstdDecompressor().decompressobj().decompress(replace.read_bytes()).decode()
    assert text.splitlines()[0] == "id,note,_fivetran_start,_fivetran_end,_fivetran_active,_fivetran_synced"
    assert "note 2" in text and incoming(landing) == []


def test_a_retried_request_lands_once(tester, landing, orders) -> None:
    files = history_files(orders, "upsert", rows(3), T0)
    for _ in range(3):  # each time new files, new keys, new IVs: the same batch
        assert answer(tester.send(orders, files, T0))[0] == "success"
    assert len(batch_folders(landing, "orders")) == 1
    tester.send(orders, history_files(orders, "upsert", rows(2, start=10), T0), T0)
    assert [name[:6] for name in batch_folders(landing, "orders")] == ["000001", "000002"]


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        ({"keys": {"replace": None}}, "the request gives no key for its replace file"),
        ({"keys": {"replace": bytes(32)}}, "does not decrypt with the key the request gives for it"),
        ({"keys": {"replace": bytes(16)}}, "its key is 16 bytes long; AES-256 takes a key of 32"),
        ({"data": {"replace": b"short"}}, "shorter than the 16-byte IV"),
    ],
    ids=["no key", "wrong key", "short key", "cut file"],
)
def test_a_file_that_does_not_decrypt_is_refused_and_lands_nothing(tester, landing, orders, tamper, said) -> None:
    which, message = answer(tester.send(orders, history_files(orders, "upsert", rows(3), T0), T0, **tamper))
    assert (
        which == "task"
        and said in message
        and message.startswith("table tester.orders: ")
        and "replace file" in message
    )
    assert "note 1" not in message  # no value in an answer
    assert batch_folders(landing, "orders") == [] and incoming(landing) == []


def test_bytes_that_decrypt_but_are_not_zstd_are_refused(tester, landing, orders) -> None:
    files = history_files(orders, "upsert", rows(3), T0)
    key = bytes(range(32))
    frame = zstandard.ZstdCompressor().compress(b"id,note,_fivetran_start\n" * 2000)
    for data, said in (
        (encrypted(frame[: len(frame) // 2], key), "its zstd data is cut short"),
        (encrypted(b"id,note\n1,x\n", key), "does not hold zstd data"),
    ):
        which, message = answer(tester.send(orders, files, T0, keys={"replace": key}, data={"replace": data}))
        assert which == "task" and said in message and message.startswith("table tester.orders: replace file"), message
    assert batch_folders(landing, "orders") == [] and incoming(landing) == []


def test_a_column_the_table_does_not_have_is_refused(tester, landing, orders) -> None:
    wider = TableDef("orders", {**orders.columns, "surprise": {"type": "STRING"}}, ["id"], history_mode=True)
    which, message = answer(tester.send(wider, history_files(wider, "upsert", rows(2), T0), T0))
    assert which == "task"
    assert "table tester.orders" in message and "replace file" in message and "'surprise'" in message
    assert batch_folders(landing, "orders") == []


def test_a_row_without_its_key_is_refused_naming_the_row(tester, landing, orders) -> None:
    sent = [*rows(2), {"id": None, "note": "x", "op_time": "2024-06-01T00:00:09Z"}]
    files = history_files(orders, "upsert", sent, T0)
    files["earliest"] = [r for r in files["earliest"] if r["id"] is not None]
    which, message = answer(tester.send(orders, files, T0))
    assert which == "task" and "row 3" in message and "key column 'id' holds no value" in message
    assert batch_folders(landing, "orders") == []


def test_an_unknown_table_is_refused_and_a_truncate_of_one_is_no_error(tester, landing) -> None:
    which, message = answer(tester.send(ORDERS, history_files(ORDERS, "upsert", rows(1), T0), T0))
    assert which == "task" and "table tester.orders is unknown to the destination" in message
    assert answer(tester.truncate("orders", T0, soft=False)) == ("success", "True")
    assert not (landing / "tester" / "orders").exists()


def test_a_table_is_written_in_its_own_mode_only(tester, landing, orders) -> None:
    tester.define("create_table", CLICKS)
    live = TableDef("orders", orders.columns, ["id"], history_mode=False)
    which, message = answer(tester.send(live, live_files(live, "upsert", rows(1), T0), T0))
    assert which == "task" and "in history mode: Fivetran writes it with WriteHistoryBatch" in message
    history = TableDef("clicks", CLICKS.columns, ["id"], history_mode=True)
    clicks = [{"id": 1, "page": "/", "op_time": "2024-06-01T00:00:00Z"}]
    which, message = answer(tester.send(history, history_files(history, "upsert", clicks, T0), T0))
    assert which == "task" and "not in history mode" in message


def test_create_and_alter_keep_the_table_whole(tester, landing, orders) -> None:
    assert answer(tester.define("create_table", orders))[0] == "success"  # a retried CreateTable
    other = TableDef("orders", {"id": {"type": "LONG"}}, ["id"], history_mode=True)
    assert answer(tester.define("create_table", other)) == (
        "task",
        "table tester.orders exists already, with other columns",
    )
    retyped = TableDef("orders", {"id": {"type": "LONG"}, "note": {"type": "INT"}}, ["id"], history_mode=True)
    which, message = answer(tester.define("alter_table", retyped))
    assert which == "task" and "column 'note' is string and AlterTable asks int" in message
    rekeyed = TableDef("orders", orders.columns, ["id", "note"], history_mode=True)
    which, message = answer(tester.define("alter_table", rekeyed))
    assert which == "task" and "moves column 'note' into the primary key" in message
    assert batch_folders(landing, "orders") == []
    described = tester.describe("orders").table
    assert [(c.name, common.DataType.Name(c.type), c.primary_key) for c in described.columns] == [
        ("id", "LONG", True),
        ("note", "STRING", False),
        ("_fivetran_start", "UTC_DATETIME", True),
        ("_fivetran_end", "UTC_DATETIME", False),
        ("_fivetran_active", "BOOLEAN", False),
        ("_fivetran_synced", "UTC_DATETIME", False),
    ]
    assert tester.describe("nowhere").not_found


def test_a_column_named_as_staging_names_its_own_is_refused(tester) -> None:
    odd = TableDef("odd", {"id": {"type": "INT"}, "_LH_kind": {"type": "STRING"}}, ["id"], history_mode=True)
    which, message = answer(tester.define("create_table", odd))
    assert which == "task" and "column '_LH_kind' has a name lakehistory keeps for its own columns" in message
    assert tester.describe("odd").not_found


def test_tables_land_at_once_each_in_its_own_order(channel, landing) -> None:
    tester = FivetranConnection(channel, {"landing_root": str(landing)})
    tables = [TableDef(f"t{n}", ORDERS.columns, ["id"], history_mode=True) for n in range(6)]
    for table in tables:
        tester.define("create_table", table)

    def sync(table: TableDef) -> list[str]:
        return [
            answer(tester.send(table, history_files(table, "upsert", rows(50, start=k * 50), T0), T0))[0]
            for k in range(4)
        ]

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(sync, tables))
    assert answers == [["success"] * 4] * 6
    for table in tables:
        assert [name[:6] for name in batch_folders(landing, table.name)] == ["000001", "000002", "000003", "000004"]


def test_the_setup_form_and_its_tests(channel, tmp_path: Path) -> None:
    stub = sdk_grpc.DestinationConnectorStub(channel)
    form = stub.ConfigurationForm(common.ConfigurationFormRequest())
    assert [(f.name, f.required) for f in form.fields] == [("landing_root", True), ("spark_remote", False)]
    assert [t.name for t in form.tests] == ["landing_root", "spark_remote"]
    assert stub.Capabilities(sdk.CapabilitiesRequest()).batch_file_format == sdk.CSV

    def test(name: str, **configuration: str) -> tuple[str, str]:
        response = stub.Test(common.TestRequest(name=name, configuration=configuration))
        return response.WhichOneof("response"), response.failure

    assert test("landing_root", landing_root=str(tmp_path / "new")) == ("success", "")
    (tmp_path / "a_file").write_text("")
    which, failure = test("landing_root", landing_root=str(tmp_path / "a_file" / "below"))
    assert which == "failure" and "is not writable" in failure
    assert "is not an absolute path" in test("landing_root", landing_root="relative/landing")[1]
    assert "s3a://bucket" in test("landing_root", landing_root="s3a://bucket/landing")[1]
    assert test("spark_remote", spark_remote="") == ("success", "")
    which, failure = test("spark_remote", spark_remote="sc://127.0.0.1:9")
    assert which == "failure" and "does not answer" in failure


def test_the_health_check_answers_serving(server: Server, channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "fivetran_sdk.v2.DestinationConnector"):
        status = health.Check(health_pb2.HealthCheckRequest(service=service)).status
        assert status == health_pb2.HealthCheckResponse.SERVING


def test_a_request_without_a_landing_root_is_refused(channel) -> None:
    stub = sdk_grpc.DestinationConnectorStub(channel)
    response = stub.CreateTable(sdk.CreateTableRequest(schema_name="tester", table=ORDERS.message()))
    assert answer(response) == ("task", "the configuration has no 'landing_root': the setup form asks for it")


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"id,note,_fivetran_start\n1,a\n", "row 1 has 2 fields where the header has 3"),
        (b"id,note,_fivetran_start\n1,\xff\xfe,2024-06-01T00:00:00Z\n", "not UTF-8 text"),
        (b'id,note,_fivetran_start\n1,"never closed\n', "row 2: not CSV"),
        (b"id,id,_fivetran_start\n", "names column 'id' twice"),
        (b"note,_fivetran_start\n", "has no column 'id'"),
        (b"", "empty, where a CSV batch file begins with its header"),
    ],
    ids=["misaligned", "not utf-8", "open quote", "column twice", "no key column", "empty"],
)
def test_a_file_that_is_not_the_tables_csv_is_refused(channel, landing, data, said) -> None:
    plain = FivetranConnection(channel, {"landing_root": str(landing)}, plain_text=True)
    plain.define("create_table", ORDERS)
    which, message = answer(
        plain.send(ORDERS, history_files(ORDERS, "upsert", rows(1), T0), T0, data={"replace": data})
    )
    assert which == "task" and said in message and message.startswith("table tester.orders: replace file"), message
    assert batch_folders(landing, "orders") == [] and incoming(landing) == []
