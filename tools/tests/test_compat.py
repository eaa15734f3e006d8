"""The support matrix's combinations (setup/compat), read as files: each lies inside the ranges
the distributions declare, and has Delta's jars pinned for its delta-spark and pyspark."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lakehistory.runtime import jars
from lakehistory_tools import compat

COMBINATIONS = sorted(compat.COMBINATIONS.glob("*.txt"))
PINNED = [p for p in COMBINATIONS if not compat.resolved(p)]


def pins(path: Path) -> dict[str, str]:
    """Package name -> pinned version, of the lock's pins under a combination's own."""
    lines = compat.pinned_lines(compat.LOCK) + compat.pinned_lines(path)
    return {compat.package_name(line): line.split("==", 1)[1] for line in lines if "==" in line}


def declared() -> list[Requirement]:
    found = []
    for distribution in compat.DISTRIBUTIONS:
        project = tomllib.loads((compat.REPOSITORY / distribution / "pyproject.toml").read_text())["project"]
        found += [Requirement(r) for r in project["dependencies"]]
    return found


@pytest.mark.parametrize("path", PINNED, ids=lambda p: p.stem)
def test_a_combination_lies_inside_the_declared_ranges(path: Path) -> None:
    pinned = pins(path)
    checked = 0
    for requirement in declared():
        name = requirement.name.lower().replace("_", "-")
        if name in ("pyspark", "delta-spark", "dbt-core", "dbt-spark"):
            assert requirement.specifier.contains(pinned[name]), f"{path.stem}: {name} {pinned[name]} {requirement}"
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("path", PINNED, ids=lambda p: p.stem)
def test_a_combination_has_its_delta_jars_pinned(path: Path) -> None:
    pinned = pins(path)
    release = jars.delta_jars(pinned["delta-spark"], pinned["pyspark"])
    assert release.version == pinned["delta-spark"]


def test_the_matrix_spans_the_oldest_and_newest_combinations() -> None:
    assert {p.stem for p in COMBINATIONS} >= {"oldest", "pinned", "newest"}
    assert pins(compat.COMBINATIONS / "oldest.txt")["pyspark"].startswith("4.0.")


def test_a_combination_pins_what_it_names_over_the_test_tools() -> None:
    wanted = compat.requirements(compat.COMBINATIONS / "oldest.txt")
    names = [compat.package_name(line) for line in wanted]
    assert names.count("pyspark") == 1 and "pytest" in names
    assert "dbt-tests-adapter" not in names  # the lock's, which follows dbt-core's minor version


def test_the_newest_combination_pins_nothing_of_spark_delta_or_dbt() -> None:
    """pip chooses its versions when it runs, so a release that lakehistory has no jars for fails
    `make test-compat` before a user meets it."""
    newest = compat.COMBINATIONS / "newest.txt"
    assert compat.resolved(newest)
    named = {compat.package_name(line) for line in compat.pinned_lines(newest)}
    assert not named & {"pyspark", "delta-spark", "dbt-core", "dbt-spark", "dbt-adapters"}


def test_the_newest_combination_installs_as_the_readme_says() -> None:
    """The README's install command, as written: the wheels of the two distributions and, beside
    them, exactly the requirement lines of `newest.txt`."""
    readme = (compat.REPOSITORY / "README.md").read_text()
    section = readme.split("## Use it in your own dbt project", 1)[1]
    (command,) = [line for line in section.splitlines() if line.startswith("python -m pip install dist/")]
    words = shlex.split(command)[4:]
    assert [w for w in words if w.startswith("dist/")] == ["dist/dbt_sparksession-*.whl", "dist/lakehistory-*.whl"]
    extra = [w for w in words if not w.startswith("dist/")]
    assert extra == compat.pinned_lines(compat.COMBINATIONS / "newest.txt")
