# The two commands: `make run` and `make test`. Everything else is a convenience.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-all bootstrap bootstrap-test unit integration chaos cluster cluster-down cluster-test down status lock bench lint

run: bootstrap
	$(BIN)/streamops platform up
	$(BIN)/streamops deploy user_activity

# three xdist workers on two cores (the end-to-end tests wait on JVMs, triggers and Airflow's
# loops as much as they compute): the Airflow tests on one, the rest spread (tests/conftest.py);
# four ran clean but slower once the machine is busy all the time (docs/architecture.md#tests)
PYTEST_WORKERS ?= 3
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup

# `make test` (CI) leaves out the `extended` variants (each names the sibling that covers its
# behaviour, docs/architecture.md#tests); `make test-all` runs them too
test: bootstrap-test
	$(BIN)/python -m pytest $(XDIST) -m "not extended"

test-all: bootstrap-test
	$(BIN)/python -m pytest $(XDIST)

# only the short seeded chaos runs (tests/integration/faults/test_chaos.py, about 4 minutes each; the
# driver's commit path is part of `make test`, the executors' one of `make test-all`)
chaos: bootstrap-test
	$(BIN)/python -m pytest -m chaos

# a Kafka cluster of three KRaft nodes on loopback (ports 19092-19097) for a person to point the
# platform at (`platform up --external kafka=...`); the cluster fault test alone
cluster: bootstrap
	$(BIN)/python -m streamops.platform.kafka_cluster up

cluster-down:
	$(BIN)/python -m streamops.platform.kafka_cluster down

cluster-test: bootstrap-test
	$(BIN)/python -m pytest -m cluster

unit: bootstrap-test
	$(BIN)/python -m pytest -m unit

integration: bootstrap-test
	$(BIN)/python -m pytest -m integration $(XDIST)

bootstrap:
	@scripts/bootstrap.sh

bootstrap-test:
	@scripts/bootstrap.sh --test

down:
	$(BIN)/streamops platform down

status:
	$(BIN)/streamops platform status

# Re-resolve the hashed lock after changing dependencies in pyproject.toml.
lock:
	uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes \
	  --no-header --no-annotate -o requirements.lock

bench: bootstrap
	$(BIN)/python bench/startup.py

lint: bootstrap
	$(BIN)/ruff check streamops plugins dags jobs tests bench
