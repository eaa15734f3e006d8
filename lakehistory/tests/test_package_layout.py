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
