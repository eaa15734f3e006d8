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
