"""The SQL the package's macros write, linted as dbt rendered it for the demo: sqlfluff with the
project's rules (.sqlfluff), over every model, analysis and data test the demo compiled. A macro
file renders to no SQL by itself, so `make lint` cannot read what its macros write; this can."""

from __future__ import annotations

from sqlfluff.core import FluffConfig, Linter

from harness import REPO_ROOT, DbtProject


def test_the_sql_the_macros_write_passes_the_project_s_linter(demo: DbtProject) -> None:
    # The project's own nodes; `dbt show --inline` of other tests compiles into "from remote system.sql/".
    compiled = sorted(
        p
        for p in (demo.project_dir / "target" / "compiled").rglob("*.sql")
        if p.is_file() and "from remote system" not in str(p)
    )
    assert len(compiled) > 50, "the demo compiled fewer files than it has models and tests"
    # The project's rules (.sqlfluff) but those that judge how generated SQL reads rather than what
    # it does: its layout is the Jinja's; identifiers are quoted everywhere (RF06), qualified where
    # a name could be ambiguous (RF03), named even when unchanged (AL09); joins follow the query's
    # logic (ST09); an as-of macro returns a subquery, which its caller may leave unaliased (AL10)
    # or join (ST05); and sqlfluff reads a `lateral view` alias as a table (RF02).
    excluded = "layout,ST06,RF04,AM04,RF06,RF03,AL09,ST09,AL10,ST05,RF02"
    overrides = {"templater": "raw", "dialect": "sparksql", "exclude_rules": excluded}
    config = FluffConfig.from_path(str(REPO_ROOT), overrides=overrides)
    linter = Linter(config=config)
    found = []
    for path in compiled:
        for violation in linter.lint_string(path.read_text(), fname=str(path)).get_violations():
            found.append(f"{path.relative_to(demo.project_dir)}:{violation.line_no}: {violation.desc()}")
    assert not found, f"{len(found)} findings:\n" + "\n".join(found[:40])
