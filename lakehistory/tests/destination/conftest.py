"""A destination server in this process, and Fivetran's side of a connection to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from lakehistory.destination.server import Server
from lakehistory_tools.fivetran_tester import FivetranConnection


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = Server(port=0, host="127.0.0.1", workers=4)
    yield started
    started.stop(grace=5)


@pytest.fixture
def channel(server: Server) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as opened:
        yield opened


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return tmp_path / "landing"


@pytest.fixture
def tester(channel: grpc.Channel, landing: Path) -> FivetranConnection:
    return FivetranConnection(channel, {"landing_root": str(landing)})
