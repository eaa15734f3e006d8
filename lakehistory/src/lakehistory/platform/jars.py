"""Delta Lake's jars: resolved once from Maven Central by Spark's own resolver (Ivy), then kept
in `.local/jars` so every later run, including CI reruns, works without the network.

    python -m lakehistory.platform.jars ensure
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from lakehistory.platform.paths import jar_dir, local_home

# delta-spark's wheel and jars must match; 4.4.0 is the newest release whose jars are on Maven
# Central for Spark 4.2 (the artifact name carries the Spark minor since Delta 4.1).
DELTA_VERSION = "4.4.0"
SPARK_MINOR = "4.2"
SCALA = "2.13"
PACKAGE = f"io.delta:delta-spark_{SPARK_MINOR}_{SCALA}:{DELTA_VERSION}"
# Spark ships every other dependency itself (Hadoop, Parquet, Jackson, Scala).
REQUIRED = (
    f"io.delta_delta-spark_{SPARK_MINOR}_{SCALA}-{DELTA_VERSION}.jar",
    f"io.delta_delta-storage-{DELTA_VERSION}.jar",
)


def missing(directory: Path) -> list[str]:
    return [name for name in REQUIRED if not (directory / name).is_file()]


def ensure() -> Path:
    target = jar_dir()
    if not missing(target):
        print(f"setup: Delta Lake {DELTA_VERSION} jars cached in {target}")
        return target
    print(f"setup: downloading Delta Lake {DELTA_VERSION} jars (once)")
    from pyspark.sql import SparkSession

    ivy = local_home() / "ivy"
    with tempfile.TemporaryDirectory() as scratch:
        spark = (
            SparkSession.builder.master("local[1]")
            .appName("lakehistory-jars")
            .config("spark.jars.packages", PACKAGE)
            .config("spark.jars.ivy", str(ivy))
            .config("spark.ui.enabled", "false")
            .config("spark.sql.warehouse.dir", scratch)
            .getOrCreate()
        )
        spark.stop()
    target.mkdir(parents=True, exist_ok=True)
    for name in REQUIRED:
        source = ivy / "jars" / name
        if not source.is_file():
            sys.exit(f"setup: Spark's resolver did not fetch {name} for {PACKAGE} (is Maven Central reachable?)")
        shutil.copy2(source, target / name)
    print(f"setup: Delta Lake jars cached in {target}")
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["ensure"]:
        sys.exit("usage: python -m lakehistory.platform.jars ensure")
    ensure()
