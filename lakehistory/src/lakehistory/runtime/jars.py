"""Delta Lake's jars and Hadoop's S3A connector: downloaded once from Maven Central, checked
against the SHA-256 written here, then kept in `.local/jars` so every later run, including CI
reruns, works without the network.

    python -m lakehistory.runtime.jars ensure                  # Delta's: every session loads them
    python -m lakehistory.runtime.jars ensure --object-store   # and S3A's, for s3a:// URIs

The S3A connector (its AWS SDK bundle is most of setup's download) is fetched only for a session
on object storage: the Connect server and the tests that start one fetch it when they need it.

A plain download of two files, not Spark's resolver: starting a Spark session to resolve them cost
about 20 s of every fresh checkout's setup. LAKEHISTORY_MAVEN_REPOSITORY names a mirror of Maven
Central; the usual `https_proxy` variables are honoured.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from lakehistory.runtime.paths import jar_dir

SCALA = "2.13"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class DeltaJars:
    """Delta's two jars for one delta-spark release built for one Spark minor version, with the
    SHA-256 of each (checked against Maven Central's SHA-1 when they were written here)."""

    version: str
    spark_minor: str
    artifact: str  # Delta 4.0 names its jar for Scala only, later releases for Spark and Scala
    spark_sha256: str
    storage_sha256: str

    @property
    def artifacts(self) -> dict[str, tuple[str, str]]:
        v = self.version
        return {
            f"io.delta_{self.artifact}-{v}.jar": (
                f"io/delta/{self.artifact}/{v}/{self.artifact}-{v}.jar",
                self.spark_sha256,
            ),
            f"io.delta_delta-storage-{v}.jar": (
                f"io/delta/delta-storage/{v}/delta-storage-{v}.jar",
                self.storage_sha256,
            ),
        }


# delta-storage's SHA-256 for each release.
_STORAGE = {
    "4.0.1": "ecc42c5aaa51c423312d9e4e48aa4a12b34740bf2c37de0e8f279277ec3d12e4",
    "4.1.0": "6d0520ffcc35b582369f92c23fa24e14a5bb935cf6e31ed7f47c5046ae17cb25",
    "4.2.0": "2d84df76551f2b3cd27b120abec67ccbba324cea6ec45eb659edcc54234f99f3",
    "4.3.0": "d765a7144289c292e256963f810c1a4b096a8c09bdb3b0370096393b6a02b3c5",
    "4.3.1": "577c12c7e371be4c041714fb48e88ad86e3c3512beea2bdaffbe7a4debf79718",
    "4.4.0": "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc",
}
# delta-spark's SHA-256 for each release and Spark minor it was built for: every pair of the
# package's ranges that Maven Central has jars for (README "Where it runs"). The wheel and the jars
# must be of one release, and a release's jar is built for one Spark minor. Delta 4.1 to 4.3 were
# built for Spark 4.0 and 4.1 only, and delta-spark 4.4.1 has no jars on Maven Central, so the
# ranges leave it out.
_SPARK = {
    ("4.1.0", "4.0"): "ad80099aed25b3db4a2c811166beda79ae954cec9acdb23fb52ecbb6737fa104",
    ("4.1.0", "4.1"): "9b05d7a82196ee1f1073733a45a2faae59161e52b86ae918fe6742fad6eaf036",
    ("4.2.0", "4.0"): "c2fa12fc2df52ddb494c57df0561ba2ed68dbf5c67f438987faac5ea1552b6a0",
    ("4.2.0", "4.1"): "8480050a55c7e50427f3bec3af9243f98fc7cbfa453a2ef55e6ea8d0b7b121ff",
    ("4.3.0", "4.0"): "8cf3be21bfb8a4dffd7a8ba0a84496fe764d442987da5fe515cae72a3352c683",
    ("4.3.0", "4.1"): "35ae4164ee41bbfc8bdb52dcd3715ff4e1821a18c085e7a71a462e8e80e23ee5",
    ("4.3.1", "4.0"): "29cf792052bcce08c58827953cdbcc29b8b21c52f9747a22e72eac2b64cf57e9",
    ("4.3.1", "4.1"): "ebf35a4383f0a653c3ee3c7882c0edcac2f846be31ac61af4b96ccfaaf36c171",
    ("4.4.0", "4.0"): "49e899667168b9412f83cbe894ce264107d7b896d6c5e12edca4e216845c1104",
    ("4.4.0", "4.1"): "75a9400986853c061f5109f012547de2545a5759e5e752e5ef633dabe16a4f10",
    ("4.4.0", "4.2"): "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead",
}
DELTA_RELEASES = (
    # Delta 4.0 names its jar for Scala only, later releases for Spark and Scala.
    DeltaJars(
        "4.0.1",
        "4.0",
        f"delta-spark_{SCALA}",
        "a1e76860b19fe1e6b205a4ea7a9099a2f9575d39bb71d49b3e679b299d0efb91",
        _STORAGE["4.0.1"],
    ),
    *(
        DeltaJars(version, minor, f"delta-spark_{minor}_{SCALA}", sha256, _STORAGE[version])
        for (version, minor), sha256 in _SPARK.items()
    ),
)
# The Delta jars a Spark session of this project loads: a folder of `jar_dir()` holding those of
# the installed delta-spark and pyspark only (ensure() keeps it so), which the profile names by
# a glob, so that one profile serves every supported combination.
DELTA_FOLDER = "delta"


def installed_versions() -> tuple[str, str]:
    """(delta-spark's version, pyspark's) as installed."""
    return metadata.version("delta-spark"), metadata.version("pyspark")


def delta_jars(delta: str | None = None, spark: str | None = None) -> DeltaJars:
    """The jars of delta-spark `delta` for pyspark `spark` (default: the installed ones)."""
    if delta is None or spark is None:
        delta, spark = installed_versions()
    minor = ".".join(spark.split(".")[:2])
    for release in DELTA_RELEASES:
        if release.version == delta and release.spark_minor == minor:
            return release
    raise SystemExit(
        f"setup: lakehistory has no Delta jars pinned for delta-spark {delta} with pyspark {spark}"
        f" (a release newer than this lakehistory, or a pair Delta publishes no jars for). {_remedy(minor)}"
    )


def _remedy(spark_minor: str) -> str:
    """The command that installs a pinned combination: the newest delta-spark pinned for this
    pyspark, or else the newest pair pinned."""

    def newest(releases: list[DeltaJars]) -> DeltaJars:
        return max(releases, key=lambda r: (_numbers(r.spark_minor), _numbers(r.version)))

    same_spark = [r for r in DELTA_RELEASES if r.spark_minor == spark_minor]
    if same_spark:
        release = newest(same_spark)
        command = f"python -m pip install 'delta-spark=={release.version}'"
    else:
        release = newest(list(DELTA_RELEASES))
        command = f"python -m pip install 'pyspark=={release.spark_minor}.*' 'delta-spark=={release.version}'"
    supported = ", ".join(f"delta-spark {r.version} with pyspark {r.spark_minor}" for r in DELTA_RELEASES)
    return f"Run `{command}`, then this again. Pinned: {supported}."


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


# Hadoop's S3A connector, for a lakehouse and landing on object storage (s3a:// URIs): hadoop-aws
# of the Hadoop Spark ships (3.5.0), with the AWS SDK bundle and the S3 input stream its pom
# names as compile dependencies. The bundle is large (686 MB): it shades the SDK's own
# dependencies, so none of them meets a version Spark ships.
HADOOP_VERSION = "3.5.0"
AWS_SDK_VERSION = "2.35.4"
S3_ACCELERATOR_VERSION = "1.3.1"
OBJECT_STORE = {
    f"org.apache.hadoop_hadoop-aws-{HADOOP_VERSION}.jar": (
        f"org/apache/hadoop/hadoop-aws/{HADOOP_VERSION}/hadoop-aws-{HADOOP_VERSION}.jar",
        "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa",
    ),
    f"software.amazon.awssdk_bundle-{AWS_SDK_VERSION}.jar": (
        f"software/amazon/awssdk/bundle/{AWS_SDK_VERSION}/bundle-{AWS_SDK_VERSION}.jar",
        "db4b55f24ad1b4e70f17eb1717a4de76a8dadc5a27d764be7c44ff67b2c1c677",
    ),
    f"software.amazon.s3.analyticsaccelerator_analyticsaccelerator-s3-{S3_ACCELERATOR_VERSION}.jar": (
        f"software/amazon/s3/analyticsaccelerator/analyticsaccelerator-s3/{S3_ACCELERATOR_VERSION}/"
        f"analyticsaccelerator-s3-{S3_ACCELERATOR_VERSION}.jar",
        "4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e",
    ),
}


def artifacts(object_store: bool = True) -> dict[str, tuple[str, str]]:
    """The jars the project caches for the installed combination: Delta's, then S3A's (with
    `object_store`)."""
    return {**delta_jars().artifacts, **(OBJECT_STORE if object_store else {})}


def required() -> tuple[str, ...]:
    """The jars every session loads: Delta's, for the installed delta-spark and pyspark."""
    return tuple(delta_jars().artifacts)


def for_object_store() -> tuple[str, ...]:
    """The jars a session on object storage loads: Delta's and Hadoop's S3A connector."""
    return (*required(), *OBJECT_STORE)


def missing(directory: Path, wanted: dict[str, tuple[str, str]]) -> list[str]:
    return [name for name in wanted if not (directory / name).is_file()]


def missing_for_object_store() -> list[str]:
    """The S3A connector's jars not cached yet (a setup that did not need them)."""
    return missing(jar_dir(), OBJECT_STORE)


def download(name: str, artifact: tuple[str, str], target: Path, repository: str) -> None:
    """One jar (its path in the repository and SHA-256) into `target` as `name`, streamed to disk
    and hashed on the way, kept under its final name only once its checksum matched."""
    path, sha256 = artifact
    url = f"{repository.rstrip('/')}/{path}"
    partial = target / f".{name}.partial"
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=120) as response, partial.open("wb") as out:  # noqa: S310 - Maven Central or the mirror the user names
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except OSError as error:
        partial.unlink(missing_ok=True)
        sys.exit(f"setup: could not download {url} ({error}); is {repository} reachable?")
    if digest.hexdigest() != sha256:
        partial.unlink()
        sys.exit(f"setup: {url} does not have the SHA-256 lakehistory expects ({sha256}); nothing was kept")
    partial.replace(target / name)


def ensure(object_store: bool = False) -> Path:
    """The jars of the installed combination cached in `jar_dir()` (with `object_store`, S3A's
    too), and its `delta` folder holding exactly the installed delta-spark's (linked from the
    cache, so that switching versions back and forth downloads nothing twice)."""
    target = jar_dir()
    delta = delta_jars()
    wanted = artifacts(object_store)
    what = f"Delta Lake {delta.version} (Spark {delta.spark_minor})"
    what += f" and S3A {HADOOP_VERSION} jars" if object_store else " jars"
    if missing(target, wanted):
        repository = os.environ.get("LAKEHISTORY_MAVEN_REPOSITORY", MAVEN_CENTRAL)
        print(f"setup: downloading {what} from {repository} (once)")
        target.mkdir(parents=True, exist_ok=True)
        for name in missing(target, wanted):
            download(name, wanted[name], target, repository)
    _select(target, tuple(delta.artifacts))
    print(f"setup: {what} cached in {target}")
    return target


def _select(target: Path, names: tuple[str, ...]) -> None:
    """`target/delta` holds `names` (jars of `target`) and nothing else."""
    folder = target / DELTA_FOLDER
    folder.mkdir(exist_ok=True)
    for stale in folder.iterdir():
        if stale.name not in names:
            stale.unlink()
    for name in names:
        if not (folder / name).is_file():
            try:
                os.link(target / name, folder / name)
            except OSError:  # another file system, or no hard links there
                shutil.copyfile(target / name, folder / name)


if __name__ == "__main__":
    if sys.argv[1:] not in (["ensure"], ["ensure", "--object-store"]):
        sys.exit("usage: python -m lakehistory.runtime.jars ensure [--object-store]")
    ensure(object_store=sys.argv[2:] == ["--object-store"])
