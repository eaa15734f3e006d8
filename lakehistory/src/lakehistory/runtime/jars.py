"""Delta Lake's jars and Hadoop's S3A connector: downloaded once from Maven Central, checked
against the SHA-256 written here, then kept in `.local/jars` so every later run, including CI
reruns, works without the network.

    python -m lakehistory.runtime.jars ensure

A plain download of two files, not Spark's resolver: starting a Spark session to resolve them cost
about 20 s of every fresh checkout's setup. LAKEHISTORY_MAVEN_REPOSITORY names a mirror of Maven
Central; the usual `https_proxy` variables are honoured.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from pathlib import Path

from lakehistory.runtime.paths import jar_dir

# delta-spark's wheel and jars must match; 4.4.0 is the newest release whose jars are on Maven
# Central for Spark 4.2 (the artifact name carries the Spark minor since Delta 4.1).
DELTA_VERSION = "4.4.0"
SPARK_MINOR = "4.2"
SCALA = "2.13"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
# Spark ships every other dependency itself (Hadoop, Parquet, Jackson, Scala). The file names are
# those Spark's resolver gave them (`group_artifact-version.jar`), which the profiles list.
ARTIFACTS = {
    f"io.delta_delta-spark_{SPARK_MINOR}_{SCALA}-{DELTA_VERSION}.jar": (
        f"io/delta/delta-spark_{SPARK_MINOR}_{SCALA}/{DELTA_VERSION}/delta-spark_{SPARK_MINOR}_{SCALA}-{DELTA_VERSION}.jar",
        "27d4fd8b1f879535c573ed1c718177d6a27f24d3e626ba02e216369725721ead",
    ),
    f"io.delta_delta-storage-{DELTA_VERSION}.jar": (
        f"io/delta/delta-storage/{DELTA_VERSION}/delta-storage-{DELTA_VERSION}.jar",
        "c46735481fa8e326b0957be02b4420cbcab4b325bb08009b7f2045a95133f1cc",
    ),
}
REQUIRED = tuple(ARTIFACTS)

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
ARTIFACTS.update(OBJECT_STORE)
FOR_OBJECT_STORE = (*REQUIRED, *OBJECT_STORE)


def missing(directory: Path) -> list[str]:
    return [name for name in ARTIFACTS if not (directory / name).is_file()]


def download(name: str, target: Path, repository: str) -> None:
    """One jar into `target`, streamed to disk and hashed on the way, kept under its final name
    only once its checksum matched."""
    path, sha256 = ARTIFACTS[name]
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


def ensure() -> Path:
    target = jar_dir()
    if not missing(target):
        print(f"setup: Delta Lake {DELTA_VERSION} and S3A {HADOOP_VERSION} jars cached in {target}")
        return target
    repository = os.environ.get("LAKEHISTORY_MAVEN_REPOSITORY", MAVEN_CENTRAL)
    print(f"setup: downloading Delta Lake {DELTA_VERSION} and S3A {HADOOP_VERSION} jars from {repository} (once)")
    target.mkdir(parents=True, exist_ok=True)
    for name in missing(target):
        download(name, target, repository)
    print(f"setup: jars cached in {target}")
    return target


if __name__ == "__main__":
    if sys.argv[1:] != ["ensure"]:
        sys.exit("usage: python -m lakehistory.runtime.jars ensure")
    ensure()
