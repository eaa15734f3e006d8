# Two commands for a new user (README.md): `make demo` and `make test`.
# Both set up whatever is missing first (setup/bootstrap.sh) and are safe to run again.
SHELL := /bin/bash
export LAKEHISTORY_HOME := $(abspath .local)
BIN := $(LAKEHISTORY_HOME)/venv/bin
DBT := $(BIN)/dbt --no-use-colors

.PHONY: demo test setup lint test-python test-connect docs clean

LANDING := $(LAKEHISTORY_HOME)/landing

demo: setup
	@test -d $(LANDING) || $(BIN)/lakehistory generate --landing $(LANDING) \
		--scale 50 --syncs 4 --seed 42 --tables meta_network,meta_station
	$(DBT) build --profiles-dir .
	@# time travel on what was just built: every table's version, and a consistent cut
	$(DBT) show --profiles-dir . --select table_versions
	$(DBT) show --profiles-dir . --select stations_as_of_version --limit 10

test: lint test-python test-connect

setup:
	@bash setup/bootstrap.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/sqlfluff lint --processes 2 models macros snapshots analyses tests lakehistory/src/dbt/include

test-python: setup
	$(BIN)/python -m pytest -m "not connect"

# A Spark Connect server of our own on 127.0.0.1, in a separate pytest process (the embedded
# session of the other tests and a Connect client do not share one process).
test-connect: setup
	$(BIN)/python -m pytest -m connect

docs: setup
	$(DBT) docs generate --profiles-dir .

clean:
	rm -rf target logs dbt_packages $(LAKEHISTORY_HOME)/lakehouse $(LANDING)
