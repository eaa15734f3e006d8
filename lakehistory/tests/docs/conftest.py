"""The docs site of the demo: `dbt docs generate` on the demo the other tests read (conftest.py's
`demo`: every model, seed, snapshot and test, built one day at a time as `make demo` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import DbtProject


@pytest.fixture(scope="session")
def docs_site(demo: DbtProject) -> Path:
    """The dbt target directory holding the generated site: index.html, manifest.json and
    catalog.json (the catalog has every built relation's columns and types)."""
    demo.run_ok("docs", "generate")
    target = demo.project_dir / "target"
    missing = [name for name in ("index.html", "manifest.json", "catalog.json") if not (target / name).is_file()]
    assert not missing, f"dbt docs generate wrote no {', '.join(missing)} in {target}"
    return target
