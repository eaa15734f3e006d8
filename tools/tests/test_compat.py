"""The support matrix's combinations (setup/compat), read as files: each lies inside the ranges
the distributions declare, and has Delta's jars pinned for its delta-spark and pyspark."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lakehistory.runtime import jars
from lakehistory_tools import compat

COMBINATIONS = sorted(compat.COMBINATIONS.glob("*.txt"))


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


@pytest.mark.parametrize("path", COMBINATIONS, ids=lambda p: p.stem)
def test_a_combination_lies_inside_the_declared_ranges(path: Path) -> None:
    pinned = pins(path)
    checked = 0
    for requirement in declared():
        name = requirement.name.lower().replace("_", "-")
        if name in ("pyspark", "delta-spark", "dbt-core", "dbt-spark"):
            assert requirement.specifier.contains(pinned[name]), f"{path.stem}: {name} {pinned[name]} {requirement}"
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("path", COMBINATIONS, ids=lambda p: p.stem)
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
