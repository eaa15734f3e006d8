"""The Delta jars' download (setup/bootstrap.sh): from a repository laid out as Maven Central is,
here a folder, kept only when its checksum is the one the project pins, for the installed
delta-spark and pyspark."""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lakehistory.runtime import jars
from lakehistory.runtime.paths import jar_dir


@pytest.fixture(autouse=True)
def delta_jars_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The download of the Delta jars stands for all: the S3A connector's SDK bundle alone is
    686 MB, and goes through the same code."""
    monkeypatch.setattr(jars, "OBJECT_STORE", {})


def repository_with(folder: Path, content: dict[str, bytes]) -> str:
    """A repository in Maven's layout holding `content` (jar name -> bytes), as a file: URL."""
    for name, body in content.items():
        path = folder / jars.artifacts()[name][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return folder.as_uri()


def test_the_pinned_jars_are_downloaded_into_an_empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = jar_dir()  # this checkout's jars, which bootstrap downloaded from Maven Central
    content = {name: (cached / name).read_bytes() for name in jars.required()}
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHISTORY_MAVEN_REPOSITORY", repository_with(tmp_path / "repo", content))
    target = jars.ensure()
    assert target == tmp_path / "home" / "jars"
    assert sorted(p.name for p in target.iterdir() if p.is_file()) == sorted(jars.required())
    assert sorted(p.name for p in (target / "delta").iterdir()) == sorted(jars.required())
    shutil.rmtree(tmp_path / "repo")  # a second call finds them and reads nothing
    assert jars.ensure() == target


def test_the_s3a_connector_is_fetched_only_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local lakehouse needs Delta's jars only; a session on object storage (the Connect
    server's `--s3a`, the store tests) asks for S3A's too. A stand-in for the connector, pinned
    by its checksum as the real one is, takes its place."""
    stand_in = b"the S3A connector"
    monkeypatch.setattr(
        jars, "OBJECT_STORE", {"s3a.jar": ("org/example/s3a/1/s3a-1.jar", hashlib.sha256(stand_in).hexdigest())}
    )
    cached = jar_dir()
    content = {name: (cached / name).read_bytes() for name in jars.required()} | {"s3a.jar": stand_in}
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHISTORY_MAVEN_REPOSITORY", repository_with(tmp_path / "repo", content))
    target = jars.ensure()
    assert sorted(p.name for p in target.iterdir() if p.is_file()) == sorted(jars.required())
    assert jars.missing_for_object_store() == ["s3a.jar"]
    jars.ensure(object_store=True)
    assert jars.missing_for_object_store() == []
    assert (target / "s3a.jar").read_bytes() == stand_in
    assert sorted(p.name for p in (target / "delta").iterdir()) == sorted(jars.required())  # S3A's beside, not in it


def test_the_delta_folder_holds_the_installed_release_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching delta-spark (another virtual environment on the same home, an upgrade) leaves
    the other release's jars cached, but not in the folder the profile loads."""
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    now = jars.delta_jars()
    other = next(r for r in jars.DELTA_RELEASES if r.version != now.version)
    target = tmp_path / "home" / "jars"
    (target / "delta").mkdir(parents=True)
    for name in (*other.artifacts, *now.artifacts):
        (target / name).write_bytes(name.encode())
        if name in other.artifacts:
            (target / "delta" / name).write_bytes(name.encode())
    jars.ensure()
    assert sorted(p.name for p in (target / "delta").iterdir()) == sorted(now.artifacts)
    assert all((target / name).is_file() for name in other.artifacts)


def test_a_combination_without_pinned_jars_is_named() -> None:
    with pytest.raises(SystemExit) as refused:
        jars.delta_jars("4.4.0", "4.3.0")
    assert "delta-spark 4.4.0 with pyspark 4.3.0" in str(refused.value)
    assert "delta-spark 4.0.1 with pyspark 4.0" in str(refused.value)


@pytest.mark.parametrize(
    ("delta", "spark", "command"),
    [
        ("4.4.1", "4.2.0", "python -m pip install 'delta-spark==4.4.0'"),
        ("4.1.0", "4.2.1", "python -m pip install 'delta-spark==4.4.0'"),
        ("4.3.1", "4.3.0", "python -m pip install 'pyspark==4.2.*' 'delta-spark==4.4.0'"),
    ],
)
def test_a_release_without_jars_names_the_command_that_installs_one(delta: str, spark: str, command: str) -> None:
    with pytest.raises(SystemExit) as refused:
        jars.delta_jars(delta, spark)
    assert f"delta-spark {delta} with pyspark {spark}" in str(refused.value)
    assert f"`{command}`" in str(refused.value)


def test_every_delta_release_the_range_admits_has_its_jars_for_spark_4_0() -> None:
    """The releases published when this was written, each within `lakehistory`'s declared range
    or left out of it; each admitted one has jars pinned for at least Spark 4.0 and 4.1."""
    project = tomllib.loads((Path(jars.__file__).parents[3] / "pyproject.toml").read_text())["project"]
    (delta_range,) = [Requirement(r) for r in project["dependencies"] if r.startswith("delta-spark")]
    published = ("4.0.1", "4.1.0", "4.2.0", "4.3.0", "4.3.1", "4.4.0", "4.4.1")
    admitted = [v for v in published if delta_range.specifier.contains(v)]
    assert "4.4.1" not in admitted and "4.2.0" in admitted
    for version in admitted:
        assert jars.delta_jars(version, "4.0.1").version == version
        if version != "4.0.1":
            assert jars.delta_jars(version, "4.1.1").spark_minor == "4.1"


def test_each_release_names_its_jars_as_maven_central_does() -> None:
    oldest = jars.delta_jars("4.0.1", "4.0.2")
    assert list(oldest.artifacts) == ["io.delta_delta-spark_2.13-4.0.1.jar", "io.delta_delta-storage-4.0.1.jar"]
    assert oldest.artifacts["io.delta_delta-spark_2.13-4.0.1.jar"][0] == (
        "io/delta/delta-spark_2.13/4.0.1/delta-spark_2.13-4.0.1.jar"
    )
    newer = jars.delta_jars("4.4.0", "4.2.0")
    assert list(newer.artifacts)[0] == "io.delta_delta-spark_4.2_2.13-4.4.0.jar"


def test_a_jar_whose_checksum_differs_is_refused_and_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tampered = {name: b"not the jar the project pins" for name in jars.required()}
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHISTORY_MAVEN_REPOSITORY", repository_with(tmp_path / "repo", tampered))
    with pytest.raises(SystemExit) as refused:
        jars.ensure()
    assert "does not have the SHA-256" in str(refused.value) and "delta-spark" in str(refused.value)
    assert list((tmp_path / "home" / "jars").iterdir()) == []


def test_an_unreachable_repository_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHISTORY_MAVEN_REPOSITORY", (tmp_path / "empty").as_uri())
    with pytest.raises(SystemExit) as refused:
        jars.ensure()
    assert "could not download" in str(refused.value) and (tmp_path / "empty").as_uri() in str(refused.value)
