"""The support matrix (`make test-compat`): each combination of Spark, Delta and dbt the package
declares, in a virtual environment of its own, built from nothing.

    python -m lakehistory_tools.compat [NAME ...]    # default: every combination of setup/compat

A combination is a file `setup/compat/NAME.txt` of requirement lines: pins of Spark's, Delta's and
dbt's packages, or (`newest.txt`) only what the README's install adds, so that pip resolves the
newest releases within the ranges each time it runs and the next release shows up here before it
reaches a user; `pinned.txt` is empty: `setup/requirements.lock`, the development and CI setup, as
it stands. For each, in `$LAKEHISTORY_HOME/compat/NAME`:
1. a fresh virtual environment with those lines, the test tools and the wheels of the
   repository's three distributions, which `python -m build` makes once per run (an sdist each,
   and the wheel from it), in one pip resolution within the ranges they declare (made anew on each
   run for a combination that is not all pins); `pip check` proves that the declared ranges
   accept the combination, and the versions pip chose are printed;
2. the Delta jars of its delta-spark and pyspark (checked by SHA-256: lakehistory.runtime.jars);
3. the engine's fast tests (ENGINE_TESTS) in that environment;
4. the demo's first daily build, data tests included (`lakehistory-demo run --syncs 1`), outside
   the checkout, its `packages.yml` installing the dbt package from this repository's git URL at
   the commit checked out, as `dbt deps` installs it from GitHub.
It prints a line per combination and step, and exits non-zero when any step failed.
`--build-only` leaves out step 3 (CI's run of a combination: the first build still runs every
history model and data test on it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lakehistory_tools.project import copy_demo_project

REPOSITORY = Path(__file__).resolve().parents[3]
COMBINATIONS = REPOSITORY / "setup" / "compat"
LOCK = REPOSITORY / "setup" / "requirements.lock"
DISTRIBUTIONS = ("dbt-sparksession", "lakehistory", "tools")
# What the tests need beside the distributions, at the lock's versions.
TEST_TOOLS = {"pytest", "pytest-xdist", "hypothesis", "boto3"}
# The engine on a Spark session (merges against the reference model, syncs, catch-ups), the jars,
# and the adapter's own checks: the tests that say whether the engine runs on a combination.
ENGINE_TESTS = (
    "lakehistory/tests/runtime/test_jars.py",
    "lakehistory/tests/history/test_catch_up.py",
    "lakehistory/tests/history/test_syncs.py",
    "lakehistory/tests/adapter/test_sparksession_adapter.py",
)
DEMO = ("--scale", "50", "--syncs", "1", "--seed", "42", "--extract-tables", "meta_history,meta_vars")


@dataclass
class Step:
    name: str
    seconds: float
    ok: bool
    detail: str = ""


def package_name(requirement: str) -> str:
    """A requirement line's package name, as pip compares names (`delta_spark` is `delta-spark`)."""
    return canonicalize_name(Requirement(requirement).name)


def pinned_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def resolved(combination: Path) -> bool:
    """Whether pip chooses the combination's Spark on each run: lines that pin no pyspark."""
    lines = pinned_lines(combination)
    return bool(lines) and "pyspark" not in {package_name(line) for line in lines}


def requirements(combination: Path) -> list[str]:
    """The combination's pins and the test tools; the whole lock for a combination of no pins."""
    pins = pinned_lines(combination)
    if not pins:
        return pinned_lines(LOCK)
    return pins + [line for line in pinned_lines(LOCK) if package_name(line) in TEST_TOOLS]


def build_wheels(dist: Path) -> list[Path]:
    """The three distributions' sdists and wheels in `dist` (emptied first); the wheels."""
    shutil.rmtree(dist, ignore_errors=True)
    for distribution in DISTRIBUTIONS:
        command = [sys.executable, "-m", "build", "--outdir", str(dist), str(REPOSITORY / distribution)]
        done = subprocess.run(command, capture_output=True, text=True)  # noqa: S603 - this checkout's build
        if done.returncode:
            sys.exit(f"compat: `python -m build` of {distribution} failed:\n{done.stdout}{done.stderr}")
    return sorted(dist.glob("*.whl"))


def package_revision() -> str:
    """The commit the demo's `packages.yml` installs the dbt package at: the one checked out. What
    differs from it in the package's files is not in the build, and is said so."""
    head = _git("rev-parse", "HEAD").strip()
    if changed := _git("status", "--porcelain", "--", "macros", "dbt_project.yml"):
        print(f"compat: the demo installs the dbt package as committed; not in it:\n{changed}", flush=True)
    return head


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True, check=True)  # noqa: S603, S607
    return done.stdout


class Combination:
    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.home = root / name
        self.venv = self.home / "venv"
        self.log = self.home / "compat.log"
        self.env = {**os.environ, "LAKEHISTORY_HOME": str(self.home), "PYTHONDONTWRITEBYTECODE": "1"}
        self.env.pop("VIRTUAL_ENV", None)

    def run(self, *command: str | Path, cwd: Path = REPOSITORY) -> None:
        with self.log.open("a") as out:
            out.write(f"\n$ {' '.join(str(c) for c in command)}\n")
            out.flush()
            argv = [str(c) for c in command]
            done = subprocess.run(argv, cwd=cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
        if done.returncode:
            raise RuntimeError(f"exit {done.returncode}: {' '.join(str(c) for c in command[:4])} … (see {self.log})")

    def install(self, wheels: list[Path]) -> str:
        """A fresh environment when the requirements changed, with `wheels` installed; what it holds."""
        path = COMBINATIONS / f"{self.name}.txt"
        wanted = requirements(path)
        listed = self.home / "requirements.txt"
        if resolved(path) or not listed.is_file() or listed.read_text() != "\n".join(wanted) + "\n":
            shutil.rmtree(self.venv, ignore_errors=True)
            self.home.mkdir(parents=True, exist_ok=True)
            self.run(sys.executable, "-m", "venv", self.venv)
            python = self.venv / "bin" / "python"
            self.run(python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
            # one resolution of the lines and the wheels together, as a user's pip install makes it
            lines = _write(listed.with_suffix(".new"), wanted)
            self.run(python, "-m", "pip", "install", "--quiet", "-r", lines, *wheels)
            listed.with_suffix(".new").replace(listed)
        python = self.venv / "bin" / "python"
        # the wheels of this run, though their version is that of the last
        self.run(python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", *wheels)
        self.run(python, "-m", "pip", "check")
        return self._versions()

    def _versions(self) -> str:
        packages = ("pyspark", "delta-spark", "dbt-core", "dbt-spark", "dbt-adapters")
        script = f"from importlib.metadata import version as v; print(', '.join(f'{{p}} {{v(p)}}' for p in {packages}))"
        python = str(self.venv / "bin" / "python")
        done = subprocess.run([python, "-c", script], env=self.env, capture_output=True, text=True, check=True)  # noqa: S603
        return done.stdout.strip()

    def jars(self) -> None:
        """This combination's jars; those the repository's setup cached already are linked, not
        downloaded again (the S3A connector's bundle alone is 686 MB)."""
        cache = Path(os.environ.get("LAKEHISTORY_HOME") or REPOSITORY / ".local") / "jars"
        own = self.home / "jars"
        own.mkdir(parents=True, exist_ok=True)
        for jar in cache.glob("*.jar"):
            if not (own / jar.name).exists():
                os.link(jar, own / jar.name)
        shutil.copy(REPOSITORY / "setup" / "log4j2.properties", self.home / "log4j2.properties")
        self.run(self.venv / "bin" / "python", "-m", "lakehistory.runtime.jars", "ensure")

    def engine_tests(self) -> None:
        self.run(
            self.venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", "-m", "not connect and not slow",
            "-n", "2", "--dist", "loadgroup", *ENGINE_TESTS,
        )  # fmt: skip

    def demo(self, revision: str) -> None:
        project = self.home / "demo"
        for old in (project, self.home / "lakehouse", self.home / "landing"):
            shutil.rmtree(old, ignore_errors=True)
        copy_demo_project(REPOSITORY, project)
        (project / "packages.yml").write_text(
            f'packages:\n  - git: "{REPOSITORY.as_uri()}"\n    revision: "{revision}"\n'
        )
        bin_ = self.venv / "bin"
        options = ("--project-dir", project, "--profiles-dir", project)
        self.run(bin_ / "dbt", "--no-use-colors", "deps", *options, "--quiet", cwd=self.home)
        self.run(
            bin_ / "lakehistory-demo", "run", "--landing", self.home / "landing", *DEMO,
            "--project-dir", project, "--no-progress", cwd=self.home,
        )  # fmt: skip


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def check(combination: Combination, wheels: list[Path], revision: str, engine_tests: bool = True) -> list[Step]:
    steps: list[Step] = []
    for name, action in (
        ("install", lambda: combination.install(wheels)),
        ("jars", combination.jars),
        *([("engine tests", combination.engine_tests)] if engine_tests else []),
        ("first daily build", lambda: combination.demo(revision)),
    ):
        started = time.monotonic()
        try:
            detail = action() or ""
        except (RuntimeError, OSError, subprocess.CalledProcessError) as failed:
            steps.append(Step(name, time.monotonic() - started, False, str(failed)))
            break
        steps.append(Step(name, time.monotonic() - started, True, detail))
        print(f"{combination.name}: {name} ok in {steps[-1].seconds:.0f} s {detail}".rstrip(), flush=True)
    return steps


def main(argv: list[str] | None = None) -> int:
    known = sorted(p.stem for p in COMBINATIONS.glob("*.txt"))
    parser = argparse.ArgumentParser(prog="python -m lakehistory_tools.compat", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of {', '.join(known)} (default: all)")
    parser.add_argument("--build-only", action="store_true", help="install, jars and the first build; no engine tests")
    args = parser.parse_args(argv)
    if unknown := [n for n in args.names if n not in known]:
        parser.error(f"no combination {', '.join(unknown)} in {COMBINATIONS}; there are {', '.join(known)}")
    root = Path(os.environ.get("LAKEHISTORY_HOME") or REPOSITORY / ".local") / "compat"
    wheels = build_wheels(root / "dist")
    print(f"compat: built {', '.join(w.name for w in wheels)}", flush=True)
    revision = package_revision()
    failed = []
    for name in args.names or known:
        combination = Combination(name, root)
        combination.home.mkdir(parents=True, exist_ok=True)
        combination.log.unlink(missing_ok=True)
        steps = check(combination, wheels, revision, engine_tests=not args.build_only)
        if not all(s.ok for s in steps):
            failed.append(name)
            print(f"{name}: {steps[-1].name} FAILED after {steps[-1].seconds:.0f} s: {steps[-1].detail}", flush=True)
    print("every combination passed" if not failed else f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
