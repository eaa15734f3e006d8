"""The benchmark at its smoke scale, as `make bench` runs it but tiny: every step must run and
report. How fast it is is the benchmark's business, never a test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness import REPO_ROOT

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
}
FIGURES = {
    "small_batch_vs_hand_written",
    "catch_up_vs_one_batch",
    "batch_cost_growth",
    "vs_dbt_snapshot",
    "vs_hand_written",
    "history_fk",
    "as_of_vs_current",
}


def test_bench_smoke_reports_every_measure(tmp_path: Path) -> None:
    # A process of its own: the benchmark starts its own Spark session on its own lakehouse.
    env = {**os.environ, "LAKEHISTORY_HOME": str(REPO_ROOT / ".local")}
    env.pop("LAKEHISTORY_LAKEHOUSE", None)
    done = subprocess.run(  # noqa: S603 (our own interpreter and module)
        [sys.executable, "-m", "lakehistory_tools.bench", "--smoke", "--out", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "hold the same current rows" in done.stdout  # the bench's own check of the compared tables

    report = json.loads((tmp_path / "bench.json").read_text())
    runs = report["config"]["runs"]
    samples = report["samples"]
    assert {s["measure"] for s in samples} == MEASURES
    for measure in MEASURES:
        scales = {s["scale"] for s in samples if s["measure"] == measure}
        for scale in scales:
            mine = [s for s in samples if s["measure"] == measure and s["scale"] == scale]
            assert len(mine) == runs, (measure, scale)
            assert all(s["seconds"] > 0 and s["heap_peak_mib"] > 0 for s in mine), mine
    assert {s["scale"] for s in samples if s["measure"] == "batch_cost"} == set(report["config"]["scales"])

    figures = {f["name"]: f for f in report["figures"]}
    assert set(figures) == FIGURES
    for f in figures.values():
        assert f["ratio"] > 0 and f["numerator_spread"]["runs"] == runs, f
    as_of = [s for s in samples if s["measure"] in ("as_of_old", "current_state")]
    assert len({s["rows_returned"] for s in as_of}) == 1  # equal row counts, as compared
    assert all(0 < s["files_read"] <= s["files_total"] for s in as_of)

    with (tmp_path / "bench.csv").open() as f:
        assert sum(1 for _ in f) == len(samples) + 1
    for png in ("batch_cost.png", "ratios.png", "memory.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    for name in FIGURES:
        assert name in done.stdout  # the terminal table
