"""The dbt package's macros, read as files: every public macro and generic test dispatches, so a
project can override it, and every macro file stays short enough to read in one sitting."""

from __future__ import annotations

import re

import pytest

from harness import REPO_ROOT

MACROS = sorted((REPO_ROOT / "macros").rglob("*.sql"))
DEFINITION = re.compile(r"{%-?\s*(macro|test)\s+(\w+)\s*\(.*?\)\s*-?%}(.*?){%-?\s*end(?:macro|test)\s*-?%}", re.S)
IMPLEMENTATION = re.compile(r"^[a-z]+__")  # default__x, spark__x: the implementations of x


def test_the_package_has_macros() -> None:
    assert len(MACROS) > 10


@pytest.mark.parametrize("path", MACROS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_public_macro_dispatches(path) -> None:
    for kind, name, body in DEFINITION.findall(path.read_text()):
        if name.startswith("_") or IMPLEMENTATION.match(name):
            continue
        dispatched = f"test_{name}" if kind == "test" else name
        call = f"adapter.dispatch('{dispatched}', 'lakehistory')"
        assert call in body, f"{path.name}: {kind} {name} does not call {call}"


@pytest.mark.parametrize("path", MACROS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_macro_file_is_short(path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= 300, f"{path.relative_to(REPO_ROOT)} has {lines} lines"


def _layout_row(first_cell: str) -> str:
    """The README's layout table row whose first cell starts with `first_cell`."""
    rows = [line for line in (REPO_ROOT / "README.md").read_text().splitlines() if line.startswith(f"| {first_cell}")]
    assert len(rows) == 1, f"README's layout table has no single row for {first_cell}"
    return rows[0]


def test_the_readme_layout_names_every_macro_folder() -> None:
    named = set(re.findall(r"`(\w+)/`", _layout_row("`dbt_project.yml`, `macros/`"))) - {"macros"}
    folders = {p.name for p in (REPO_ROOT / "macros").iterdir() if p.is_dir()}
    assert named == folders


def test_the_readme_layout_names_every_engine_module_and_package() -> None:
    row = _layout_row("`lakehistory/`").split("`tests/`")[0]
    named = set(re.findall(r"`(\w+/|\w+\.py)`", row)) - {"lakehistory/", "write.py"}
    source = REPO_ROOT / "lakehistory" / "src" / "lakehistory"
    present = {p.name + "/" for p in source.iterdir() if p.is_dir() and p.name != "__pycache__"}
    present |= {p.name for p in source.glob("*.py") if p.name != "__init__.py"}
    assert named == present


# The engine's layers, lowest first: a module imports from its own layer or those below it, so no
# package imports back up and none circles.
LAYERS = [
    {"errors", "names", "sql", "runtime", "invocation", "transaction_parts"},
    {"landing", "destination"},
    {"history"},
    {"derived", "hx", "operations", "main_table"},
    {"command", "macro_names"},
    {"door"},
]


def _layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else module
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def test_the_engine_imports_only_downwards() -> None:
    source = REPO_ROOT / "lakehistory" / "src" / "lakehistory"
    upward = []
    for path in source.rglob("*.py"):
        parts = path.relative_to(source.parent).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) == 2:
            continue
        own = _layer(".".join(parts[:2]))
        text = path.read_text()
        imports = re.findall(r"^\s*from (lakehistory\.\w+)", text, re.M)
        for names in re.findall(r"^\s*from lakehistory import ([\w, ]+)", text, re.M):
            imports += [f"lakehistory.{n.split(' as ')[0].strip()}" for n in names.split(",")]
        for imported in imports:
            if _layer(imported) > own:
                upward.append(f"{'.'.join(parts)} imports {imported}")
    assert not upward


def test_one_version_everywhere() -> None:
    """The repository's VERSION is the three distributions' (each reads it through a link), the
    dbt package's and the demo's, and the changelog has a section for it."""
    version = (REPO_ROOT / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "VERSION is semver: MAJOR.MINOR.PATCH"
    for distribution in ("lakehistory", "dbt-sparksession", "tools"):
        assert (REPO_ROOT / distribution / "VERSION").resolve() == (REPO_ROOT / "VERSION").resolve()
        assert 'dynamic = ["version"]' in (REPO_ROOT / distribution / "pyproject.toml").read_text()
    for project in (REPO_ROOT / "dbt_project.yml", REPO_ROOT / "integration_tests" / "dbt_project.yml"):
        assert re.search(rf'^version: "{re.escape(version)}"', project.read_text(), re.M), project
    assert re.search(rf"^## {re.escape(version)}\b", (REPO_ROOT / "CHANGELOG.md").read_text(), re.M)
