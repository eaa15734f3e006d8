"""Timing, peak driver memory and scan statistics of one measured step, and the figures made of them.

Memory is the driver's, which in local mode also runs every task: the peak of the JVM heap in use
(all heap pools, reset before each step) and the peak resident size of the JVM process (VmHWM,
reset through /proc/<pid>/clear_refs where Linux allows it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

MIB = 1024 * 1024


@dataclass
class Sample:
    """One run of one measured step."""

    measure: str  # e.g. batch_cost, dbt_snapshot, hand_written, fk_resolution
    scale: int  # rows of the table the step works on
    run: int
    seconds: float
    heap_peak_mib: float
    rss_peak_mib: float | None
    detail: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("detail"))
        return out


class Meter:
    """Measures steps on the driver of one Spark session and keeps the samples."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.samples: list[Sample] = []
        jvm: Any = spark.sparkContext._jvm
        self._management = jvm.java.lang.management.ManagementFactory
        self._pid = int(jvm.java.lang.ProcessHandle.current().pid())

    def _heap_pools(self) -> list:
        return [p for p in self._management.getMemoryPoolMXBeans() if str(p.getType().toString()) == "Heap memory"]

    def _reset(self) -> None:
        self._management.getMemoryMXBean().gc()
        for pool in self._heap_pools():
            pool.resetPeakUsage()
        with suppress(OSError):
            Path(f"/proc/{self._pid}/clear_refs").write_text("5")

    def _rss_peak_mib(self) -> float | None:
        try:
            for line in Path(f"/proc/{self._pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def measure(self, measure: str, scale: int, run: int, step: Callable[[], object], **detail: Any) -> Sample:
        """Run `step` and record it. A step that returns a number reports its own seconds (a dbt
        node's execution time); otherwise the wall time of the call counts."""
        self._reset()
        started = time.perf_counter()
        reported = step()
        wall = time.perf_counter() - started
        heap = sum(p.getPeakUsage().getUsed() for p in self._heap_pools()) / MIB
        sample = Sample(
            measure=measure,
            scale=scale,
            run=run,
            seconds=float(reported) if isinstance(reported, int | float) else wall,
            heap_peak_mib=round(heap, 1),
            rss_peak_mib=self._rss_peak_mib(),
            detail={"wall_seconds": round(wall, 3), **detail},
        )
        self.samples.append(sample)
        return sample

    def record(self, measure: str, scale: int, run: int, seconds: float, **detail: Any) -> Sample:
        """Record a figure computed from measured steps (a slope, a node's share of a run), with the
        driver's heap and resident size as they are now."""
        heap = sum(p.getUsage().getUsed() for p in self._heap_pools()) / MIB
        sample = Sample(measure, scale, run, float(seconds), round(heap, 1), self._rss_peak_mib(), detail)
        self.samples.append(sample)
        return sample

    def of(self, measure: str, scale: int | None = None) -> list[Sample]:
        return [s for s in self.samples if s.measure == measure and (scale is None or s.scale == scale)]


@contextmanager
def adaptive_off(spark: SparkSession):
    """Plain physical plans (no adaptive re-planning), so scan metrics can be read off the plan."""
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset("spark.sql.adaptive.enabled")
        else:
            spark.conf.set("spark.sql.adaptive.enabled", before)


def files_read(spark: SparkSession, sql: str) -> int:
    """Data files the scans of `sql` read after Delta's data skipping (the scan's numFiles)."""
    with adaptive_off(spark):
        frame = spark.sql(sql)
        frame.collect()
        plan = frame._jdf.queryExecution().executedPlan()
        leaves = plan.collectLeaves()
        total = 0
        for i in range(leaves.size()):
            metric = leaves.apply(i).metrics().get("numFiles")
            if metric.isDefined():
                total += int(metric.get().value())
        return total


# -- figures ------------------------------------------------------------------------------------------


@dataclass
class Spread:
    runs: int
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(len(values), statistics.median(values), min(values), max(values))

    def text(self, unit: str = "s") -> str:
        return f"{self.median:.2f}{unit} [{self.low:.2f}-{self.high:.2f}] n={self.runs}"


@dataclass
class Figure:
    """A headline: a ratio of medians (and the range of the per-run ratios) against its goal."""

    name: str
    question: str
    numerator: str  # what is divided: a description
    denominator: str
    numerator_spread: Spread
    denominator_spread: Spread
    ratio: float
    ratio_low: float
    ratio_high: float
    goal: str
    met: bool
    note: str = ""

    @classmethod
    def compare(
        cls,
        name: str,
        question: str,
        top: tuple[str, Sequence[Sample]],
        bottom: tuple[str, Sequence[Sample]],
        goal: str,
        meets: Callable[[float], bool],
        note: str = "",
    ) -> Figure:
        a, b = [s.seconds for s in top[1]], [s.seconds for s in bottom[1]]
        paired = [x / y for x, y in zip(a, b, strict=False) if y > 0]
        ratio = statistics.median(a) / statistics.median(b)
        return cls(
            name=name,
            question=question,
            numerator=top[0],
            denominator=bottom[0],
            numerator_spread=Spread.of(a),
            denominator_spread=Spread.of(b),
            ratio=ratio,
            ratio_low=min(paired) if paired else ratio,
            ratio_high=max(paired) if paired else ratio,
            goal=goal,
            met=meets(ratio),
            note=note,
        )
