# The two commands of the README: `make repro` runs the default experiment, `make test` the tests.
# Each creates .venv and installs what it needs the first time (llama-cpp-python compiles from
# source once, about 5 minutes on 2 cores; pip reuses the built wheel afterwards).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install repro test lint bench clean-cache

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedded,dev]'
	touch $(STAMP)

repro: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/cache_overhead.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/storage.py
