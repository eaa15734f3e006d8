"""What `lakehistory destination` takes to land one large request, without Spark: a server in this
process, Fivetran's side writing a batch of ROWS rows (9 columns, zstd, AES-256-CBC) for a
history-mode table and for a live one, and the request itself timed, files written beforehand.
Medians of RUNS requests, each with other content (a retry would find its batch landed).

    python -m lakehistory_tools.bench.destination [--rows 500000] [--runs 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Sequence

import grpc

from lakehistory.destination.server import Server
from lakehistory_tools.fivetran_tester import FivetranConnection, TableDef, history_files, live_files

T0 = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
COLUMNS = {"id": {"type": "LONG"}, **{f"c{i}": {"type": "STRING"} for i in range(8)}}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lakehistory_tools.bench.destination", description=__doc__)
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    rows = [
        {"id": i, **{c: f"value {i} {c}" for c in COLUMNS if c != "id"}, "op_time": "2024-06-01T00:00:00Z"}
        for i in range(args.rows)
    ]
    server = Server(port=0, host="127.0.0.1", workers=2)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            fivetran = FivetranConnection(channel, {"landing_root": tempfile.mkdtemp(prefix="destination-bench-")})
            for table, files_of, call in (
                (TableDef("history", COLUMNS, ["id"], True), history_files, fivetran.stub.WriteHistoryBatch),
                (TableDef("live", COLUMNS, ["id"], False), live_files, fivetran.stub.WriteBatch),
            ):
                fivetran.define("create_table", table)
                seconds = []
                for run in range(args.runs):
                    rows[0]["c0"] = f"run {run}"
                    request = fivetran.request(table, files_of(table, "upsert", rows, T0))
                    started = time.monotonic()
                    answer = call(request)
                    seconds.append(time.monotonic() - started)
                    assert answer.WhichOneof("response") == "success", answer
                median = statistics.median(seconds)
                print(
                    f"{table.name}: {args.rows} rows, request median {median:.2f} s ({args.rows / median:,.0f} rows/s);"
                    f" runs {', '.join(f'{s:.2f}' for s in seconds)}",
                    flush=True,
                )
    finally:
        server.stop(grace=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
