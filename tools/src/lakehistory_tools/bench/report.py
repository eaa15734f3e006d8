"""The benchmark's results: a table in the terminal, bench.csv, bench.json and PNG plots."""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lakehistory_tools.bench.measure import Figure, Sample, Spread


def scale_text(rows: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if rows >= size and rows % (size // 10) == 0:
            return f"{rows / size:g}{unit}"
    return str(rows)


def memory_rows(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per measured step and scale: the largest driver heap and resident size over its runs."""
    groups: dict[tuple[str, int], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.measure, s.scale), []).append(s)
    rows = []
    for (measure, scale), group in sorted(groups.items()):
        rss = [s.rss_peak_mib for s in group if s.rss_peak_mib is not None]
        rows.append(
            {
                "measure": measure,
                "scale": scale,
                "runs": len(group),
                "median_seconds": round(statistics.median(s.seconds for s in group), 3),
                "heap_peak_mib": max(s.heap_peak_mib for s in group),
                "rss_peak_mib": max(rss) if rss else None,
            }
        )
    return rows


def terminal(figures: Sequence[Figure], memory: Sequence[dict[str, Any]], extra: Sequence[str]) -> str:
    lines = ["", "Figures (median [min-max] of n runs; ratio of medians [range of per-run ratios])", ""]
    width = max(len(f.name) for f in figures) if figures else 10
    for f in figures:
        mark = "met" if f.met else "MISSED"
        lines.append(
            f"  {f.name:<{width}}  {f.ratio:6.2f}x [{f.ratio_low:.2f}-{f.ratio_high:.2f}]  goal {f.goal:<8} {mark}"
        )
        lines.append(f"  {'':<{width}}  {f.numerator}: {f.numerator_spread.text()}")
        lines.append(f"  {'':<{width}}  {f.denominator}: {f.denominator_spread.text()}")
        if f.note:
            lines.append(f"  {'':<{width}}  {f.note}")
    lines += ["", "Driver memory (peak over the runs of each step)", ""]
    lines.append(f"  {'step':<22} {'scale':>7} {'runs':>4} {'median s':>9} {'heap MiB':>9} {'RSS MiB':>8}")
    for m in memory:
        rss = f"{m['rss_peak_mib']:.0f}" if m["rss_peak_mib"] is not None else "-"
        lines.append(
            f"  {m['measure']:<22} {scale_text(m['scale']):>7} {m['runs']:>4} {m['median_seconds']:>9.2f}"
            f" {m['heap_peak_mib']:>9.0f} {rss:>8}"
        )
    lines += ["", *extra, ""]
    return "\n".join(lines)


def write_files(
    out: Path, config: dict, samples: Sequence[Sample], figures: Sequence[Figure], memory: Sequence[dict], notes: list
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [s.row() for s in samples]
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with (out / "bench.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    (out / "bench.json").write_text(
        json.dumps(
            {
                "config": config,
                "figures": [asdict(f) for f in figures],
                "memory": list(memory),
                "notes": notes,
                "samples": rows,
            },
            indent=2,
            default=str,
        )
    )
    return [out / "bench.csv", out / "bench.json", *plot(out, samples, figures, memory)]


def plot(out: Path, samples: Sequence[Sample], figures: Sequence[Figure], memory: Sequence[dict]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    # 1. a batch's cost against the size of the table it lands in, with the alternatives at their scale
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for measure, label, style in (
        ("batch_cost", "lakehistory merge (dbt node)", "o-"),
        ("hand_written", "hand-written PySpark MERGE", "s"),
        ("dbt_snapshot", "dbt snapshot (check, hard deletes)", "^"),
    ):
        scales = sorted({s.scale for s in samples if s.measure == measure})
        if not scales:
            continue
        spreads = [Spread.of([s.seconds for s in samples if s.measure == measure and s.scale == x]) for x in scales]
        ax.errorbar(
            scales,
            [p.median for p in spreads],
            yerr=[[p.median - p.low for p in spreads], [p.high - p.median for p in spreads]],
            fmt=style,
            capsize=3,
            label=label,
        )
    ax.set_xscale("log")
    ax.set_xlabel("history table rows")
    ax.set_ylabel("seconds per batch (median, min-max)")
    ax.set_ylim(bottom=0)
    ax.set_title("Cost of one batch against table size")
    ax.legend()
    ax.grid(alpha=0.3)
    written.append(_save(plt, fig, out / "batch_cost.png"))

    # 2. every headline ratio against its goal
    if figures:
        colors = ["tab:green" if f.met else "tab:red" for f in figures]
        fig, ax = _bars(plt, [f.name for f in figures], [f.ratio for f in figures], 0.6, color=colors)
        for i, f in enumerate(figures):
            ax.annotate(f"{f.ratio:.2f}x (goal {f.goal})", (f.ratio, i), xytext=(4, -4), textcoords="offset points")
        ax.set_xlim(0, max(f.ratio for f in figures) * 1.45)  # room for the labels
        ax.set_xlabel("ratio of medians")
        ax.set_title("Headline ratios (green: goal met)")
        written.append(_save(plt, fig, out / "ratios.png"))

    # 3. peak driver memory per step
    if memory:
        labels = [f"{m['measure']} @ {scale_text(m['scale'])}" for m in memory]
        fig, ax = _bars(plt, labels, [m["heap_peak_mib"] for m in memory], 0.35, label="JVM heap peak")
        ax.set_xlabel("MiB")
        ax.set_title("Peak driver memory")
        written.append(_save(plt, fig, out / "memory.png"))
    return written


def _bars(plt: Any, labels: Sequence[str], values: Sequence[float], row_inches: float, **style: Any) -> tuple:
    """A horizontal bar chart, one row per label, the first at the top."""
    fig, ax = plt.subplots(figsize=(7, row_inches * len(labels) + 1.5))
    ax.barh(labels, values, **style)
    ax.invert_yaxis()
    return fig, ax


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")  # the image grows to hold a label past the axes
    plt.close(fig)
    return path
