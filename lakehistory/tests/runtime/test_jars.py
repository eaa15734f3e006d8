"""The Delta jars' download (setup/bootstrap.sh): from a repository laid out as Maven Central is,
here a folder, kept only when its checksum is the one the project pins."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lakehistory.runtime import jars
from lakehistory.runtime.paths import jar_dir


@pytest.fixture(autouse=True)
def delta_jars_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The download of the Delta jars stands for all: the S3A connector's SDK bundle alone is
    686 MB, and goes through the same code."""
    monkeypatch.setattr(jars, "ARTIFACTS", {name: jars.ARTIFACTS[name] for name in jars.REQUIRED})


def repository_with(folder: Path, content: dict[str, bytes]) -> str:
    """A repository in Maven's layout holding `content` (jar name -> bytes), as a file: URL."""
    for name, body in content.items():
        path = folder / jars.ARTIFACTS[name][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return folder.as_uri()


def test_the_pinned_jars_are_downloaded_into_an_empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = jar_dir()  # this checkout's jars, which bootstrap downloaded from Maven Central
    content = {name: (cached / name).read_bytes() for name in jars.REQUIRED}
    monkeypatch.setenv("LAKEHISTORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAKEHISTORY_MAVEN_REPOSITORY", repository_with(tmp_path / "repo", content))
    target = jars.ensure()
    assert target == tmp_path / "home" / "jars"
    assert sorted(p.name for p in target.iterdir()) == sorted(jars.REQUIRED)
    shutil.rmtree(tmp_path / "repo")  # a second call finds them and reads nothing
    assert jars.ensure() == target


def test_a_jar_whose_checksum_differs_is_refused_and_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tampered = {name: b"not the jar the project pins" for name in jars.REQUIRED}
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
