# Two commands for a new user (README.md): `make demo` and `make test`.
# Both set up whatever is missing first (setup/bootstrap.sh) and are safe to run again.
SHELL := /bin/bash
export LAKEHISTORY_HOME := $(abspath .local)
BIN := $(LAKEHISTORY_HOME)/venv/bin
# The demo is the dbt project in integration_tests/; it installs the package (this folder) with `dbt deps`.
DEMO_DIR := integration_tests
DBT := $(BIN)/dbt --no-use-colors
DBT_DEMO = --project-dir $(DEMO_DIR) --profiles-dir $(DEMO_DIR)

.PHONY: demo demo-fivetran test setup setup-test lint test-python test-adapter test-slow test-cluster test-compat docs bench clean

LANDING := $(LAKEHISTORY_HOME)/landing
# The demo source: the five CRMP tables; meta_history and meta_vars arrive as daily full extracts
# (captured by dbt snapshots), the others as history-mode change batches.
DEMO := --landing $(LANDING) --scale 50 --syncs 4 --seed 42 --extract-tables meta_history,meta_vars

# One day at a time, as in production: land the next sync, then `dbt build` (a snapshot captures
# one extract per run); then time travel on what was built (every table's version, a consistent
# cut, the database as of a day; an audit of the last transaction, a version chain) and every
# table's batches: all applied, none pending. `lakehistory-demo run` (tools/.../demo.py) prints
# each step's command and runs them all in one process, on one Spark session. A second
# `make demo` finds every sync landed and builds once.
demo: setup
	$(DBT) deps $(DBT_DEMO) --quiet
	$(BIN)/lakehistory-demo run $(DEMO) --project-dir $(DEMO_DIR) --no-progress

# From the destination tester's input files to history tables (README "Fivetran: lakehistory
# destination"): a destination, Fivetran's side sending the files, dbt building the tables.
demo-fivetran: setup
	$(BIN)/python -m lakehistory_tools.fivetran_demo

test: lint test-python test-cluster

setup:
	@bash setup/bootstrap.sh

# The tests also open the docs site in a browser: Debian's chromium, installed when missing.
setup-test:
	@bash setup/bootstrap.sh --with-chromium

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/sqlfluff lint --processes 2 .
	$(BIN)/mypy

# The suite in two processes (pytest-xdist), each with a Spark session of its own: one test process
# keeps the two cores only partly busy (its JVM waits on dbt's Python between statements), so two
# share them with little left idle. conftest.py keeps each test file in one process, and every test
# that reads the demo in one, so no module fixture and no demo is built twice, and queues the
# longest groups first (--no-loadscope-reorder: pytest-xdist would queue the most tests first).
TEST_PROCESSES ?= 2
PYTEST_PROCESSES = -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder

test-python: setup-test
	$(BIN)/python -m pytest -m "not connect and not slow" $(PYTEST_PROCESSES)

# The thorough run, outside CI's budget: dbt's adapter conformance suite, then every test but the
# Connect ones, the heaviest property-based runs (marker `slow`) included, and every property test
# with more examples (harness.examples: LAKEHISTORY_THOROUGH=1).
test-slow: setup-test test-adapter
	LAKEHISTORY_THOROUGH=1 $(BIN)/python -m pytest -m "not connect" $(PYTEST_PROCESSES)

# dbt's adapter conformance suite (dbt-tests-adapter) on the sparksession adapter: a pytest run of
# its own, since dbt's test framework brings its own fixtures and projects.
test-adapter: setup
	cd dbt-sparksession && $(BIN)/python -m pytest

# The project through Spark Connect on a Spark standalone cluster of its own on 127.0.0.1 (a master,
# two workers, the server's executors in them), compared with an embedded build of the same landing.
# A pytest process of its own: the embedded session of the other tests and a Connect client do
# not share one process.
test-cluster: setup
	$(BIN)/python -m pytest -m connect

# The support matrix (README "Where it runs"): each combination of setup/compat in a virtual
# environment of its own, from nothing: its engine tests and the demo's first daily build.
# COMPAT=oldest runs one of them; COMPAT_ARGS=--build-only leaves out the engine tests (CI).
test-compat: setup
	$(BIN)/python -m lakehistory_tools.compat $(COMPAT_ARGS) $(COMPAT)

docs: setup
	$(DBT) deps $(DBT_DEMO) --quiet
	$(DBT) docs generate $(DBT_DEMO)

# The site `make docs` generated, on http://localhost:8080 (Ctrl+C stops it).
.PHONY: docs-serve
docs-serve: setup
	$(DBT) docs serve $(DBT_DEMO)

# The benchmark (README "Benchmarks"): results in $(LAKEHISTORY_HOME)/bench; BENCH_ARGS="--smoke" for a tiny run.
bench: setup
	$(BIN)/python -m lakehistory_tools.bench $(BENCH_ARGS)

clean:
	rm -rf target logs $(DEMO_DIR)/target $(DEMO_DIR)/logs $(DEMO_DIR)/dbt_packages $(LAKEHISTORY_HOME)/lakehouse $(LANDING)
