# The README's commands. `make repro` runs the default experiment, `make test` the tests; the others
# wrap the commands a reader runs next, so that each works as written in a fresh shell.
# Each creates .venv and installs what it needs the first time (llama-cpp-python compiles from
# source once, about 5 minutes on 2 cores; pip reuses the built wheel afterwards).
#
# Why make targets: dvc.yaml's stages run `python -m stages.X`, the python on the PATH. In a fresh
# shell that is the system's, which lacks the project's dependencies; a user with an environment of
# their own activated needs it to stay that way. So dvc.yaml keeps `python`, and every target below
# puts the environment's bin first on the PATH. VENV=path uses another environment (an existing
# one is only installed into, never re-created).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
ON_PATH := PATH="$(abspath $(BIN)):$$PATH"
# `python -m pipeline.tools.cli` rather than bin/judgeloop: the code of this checkout, whichever checkout
# the environment was installed from.
JUDGELOOP := $(ON_PATH) $(BIN)/python -m pipeline.tools.cli

.PHONY: install repro exp replay status audit cache report calibrate judge-evaluate test lint bench

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedded,dev]'
	touch $(STAMP)

# ARGS: stages to run (their upstream too), e.g. `make repro ARGS=rag_aggregate`.
repro: $(STAMP)
	$(ON_PATH) $(BIN)/dvc repro $(ARGS)

# An experiment of your own: `make exp ARGS="-S refine.threshold=2"` (dvc exp run records the change).
exp: $(STAMP)
	$(ON_PATH) $(BIN)/dvc exp run $(ARGS)

# Re-execute every stage from the recordings alone; no model is called.
replay: $(STAMP)
	JUDGELOOP_CACHE_MODE=replay $(ON_PATH) $(BIN)/dvc repro --force $(ARGS)

status audit cache report calibrate judge-evaluate: $(STAMP)
	$(JUDGELOOP) $@ $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(ON_PATH) $(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python bench/cache_overhead.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/storage.py
