"""The benchmark at its smoke scale, as `make bench` runs it but tiny: every step must run and
report. How fast it is is the benchmark's business, never a test's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import REPO_ROOT
from lakehistory_tools.bench.__main__ import main

SYNC_MEASURES = {
    "sync_dbt_run",
    "sync_floor",
    "sync_engine_floor",
    "sync_slope_dbt",
    "sync_slope_floor",
    "sync_slope_engine",
    "sync_ledger_commits",
    "idle_table",
}
# one sample per busy table of the counted sync (the headline table count), or one in all
# A count whose answer may be none: a busy table's node runs no dbt statement of its own.
COUNTS_THAT_MAY_BE_NONE = {"busy_table_dbt_statements"}
PER_TABLE = {"busy_table_statements", "busy_table_spark_jobs", "busy_table_lock_seconds", "busy_table_dbt_statements"}
MEASURES = {
    "batch_cost",
    "hand_written",
    "small_batch",
    "small_hand_written",
    "catch_up",
    "one_batch",
    "dbt_snapshot",
    "fk_resolution",
    "fk_equi_join",
    "as_of_old",
    "current_state",
    "sync_legacy",
    *SYNC_MEASURES,
    *PER_TABLE,
}
SYNC_FIGURES = {"sync_of_many_tables", "sync_vs_engine_floor", "sync_table_marginal", "idle_table"}
FIGURES = {
    "small_batch_vs_hand_written",
    "catch_up_vs_one_batch",
    "batch_cost_growth",
    "vs_dbt_snapshot",
    "vs_hand_written",
    "history_fk",
    "as_of_vs_current",
    "sync_of_many_tables",
    "sync_vs_engine_floor",
    "sync_table_marginal",
    "idle_table",
    *(PER_TABLE - {"busy_table_dbt_statements"}),
}


# Seven minutes of dbt runs, most of them the sync of many tables: in `make test-slow`, with `make bench`.
@pytest.mark.slow
def test_bench_smoke_reports_every_measure(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process, on the Spark session the tests before it started, if any (a session of
    # its own would cost a JVM start and its warm-up); the variables the benchmark sets are put
    # back afterwards.
    for name in ("LAKEHISTORY_LAKEHOUSE", "LAKEHISTORY_SCHEMA", "LAKEHISTORY_LANDING", "TZ"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    assert main(["--smoke", "--out", str(tmp_path), "--repository", str(REPO_ROOT)]) == 0
    stdout = capsys.readouterr().out
    assert "hold the same current rows" in stdout  # the bench's own check of the compared tables

    report = json.loads((tmp_path / "bench.json").read_text())
    samples = report["samples"]
    assert {s["measure"] for s in samples} == MEASURES
    headline = sorted(report["config"]["sync_tables"])[len(report["config"]["sync_tables"]) // 2]
    for measure in MEASURES:
        runs = report["config"]["sync_runs" if measure in SYNC_MEASURES else "runs"]
        runs = headline if measure in PER_TABLE else 1 if measure == "sync_legacy" else runs
        scales = {s["scale"] for s in samples if s["measure"] == measure}
        for scale in scales:
            mine = [s for s in samples if s["measure"] == measure and s["scale"] == scale]
            assert len(mine) == runs, (measure, scale)
            least = 0 if measure in COUNTS_THAT_MAY_BE_NONE else 1e-9
            assert all(s["seconds"] >= least and s["heap_peak_mib"] > 0 for s in mine), mine
    assert {s["scale"] for s in samples if s["measure"] == "batch_cost"} == set(report["config"]["scales"])

    figures = {f["name"]: f for f in report["figures"]}
    assert set(figures) == FIGURES
    assert {s["scale"] for s in samples if s["measure"] == "sync_dbt_run"} == set(report["config"]["sync_tables"])
    for name, f in figures.items():
        runs = report["config"]["sync_runs" if name in SYNC_FIGURES else "runs"]
        runs = headline if name in PER_TABLE else runs
        assert f["ratio"] > 0 and f["numerator_spread"]["runs"] == runs, f
    as_of = [s for s in samples if s["measure"] in ("as_of_old", "current_state")]
    assert len({s["rows_returned"] for s in as_of}) == 1  # equal row counts, as compared
    assert all(0 < s["files_read"] <= s["files_total"] for s in as_of)

    with (tmp_path / "bench.csv").open() as f:
        assert sum(1 for _ in f) == len(samples) + 1
    for png in ("batch_cost.png", "ratios.png", "memory.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    for name in FIGURES:
        assert name in stdout  # the terminal table
