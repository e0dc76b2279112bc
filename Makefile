# The README's commands. `make repro` runs the default experiment, `make test` the tests; `make help`
# lists the others, which wrap the commands a reader runs next, so that each works as written in a
# fresh shell (so does ./judgeloop, the same commands with no ARGS="..." to quote).
# Each creates .venv and installs what it needs the first time (llama-cpp-python compiles from
# source once, about 5 minutes on 2 cores; pip reuses the built wheel afterwards).
#
# Why make targets: dvc.yaml's stages run `python -m stages DESIGN STAGE`, the python on the PATH. In a fresh
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

.PHONY: help install lock repro exp replay check status audit compare diff second-run cache report calibrate judge-evaluate dvc-yaml batch test lint bench fuzz
.DEFAULT_GOAL := help

help: ## this list
	@echo "make TARGET [ARGS=\"...\"]  (or ./judgeloop COMMAND ..., the same with no quoting; ./judgeloop --help)"
	@grep -E '^[a-z][a-z -]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-15s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv and install judgeloop from the lock (the first time: about 1 min, +5 to compile llama-cpp-python)

# Every dependency, runtime and dev, is pinned in requirements/lock.txt (`make lock` refreshes it from
# pyproject.toml's ranges): a fresh machine installs what the committed runs were made with, not what
# was newest that week, on every supported Python (one version of each package for all of them).
#
# llama-cpp-python is pinned exactly and compiled portably: the release and the CMake flags are in
# pipeline/llm/llama_pin.py, which says why (read here with sed, before any environment exists).
# By default it compiles for the CPU it is built on (GGML_NATIVE), and on CPUs with AMX (Intel
# Sapphire Rapids and later, CI's among them) that build segfaults in its first decode
# (ggml-org/llama.cpp#20824); a native build also answers differently from the recordings'. We build
# it for x86-64-v3 (AVX2, FMA, F16C), which runs on any x86 machine of the last decade (on Arm these
# switches are ignored); a CPU without them is told so before anything compiles. pip's own wheel
# cache does not know the build flags, so a wheel built natively before would be reused: the wheel
# is built once into a folder named after the flags, and installed from there.
LLAMA_PIN := pipeline/llm/llama_pin.py
LLAMA_VERSION := $(shell sed -n 's/^VERSION = "\(.*\)"$$/\1/p' $(LLAMA_PIN))
LLAMA_CMAKE_ARGS ?= $(shell sed -n 's/^CMAKE_ARGS = "\(.*\)"$$/\1/p' $(LLAMA_PIN))
LLAMA_REQUIREMENT := llama-cpp-python==$(LLAMA_VERSION)
WHEELS := $(HOME)/.cache/judgeloop/wheels/$(shell printf '%s' '$(LLAMA_CMAKE_ARGS) $(LLAMA_REQUIREMENT)' | cksum | cut -d' ' -f1)
LOCK := requirements/lock.txt

$(STAMP): pyproject.toml $(LOCK) $(LLAMA_PIN)
	@test -x $(BIN)/python || { echo "creating the environment $(VENV) ($(PYTHON) -m venv)"; $(PYTHON) -m venv $(VENV); }
	@$(BIN)/python -I $(LLAMA_PIN) --check-cpu
	@echo "updating pip in $(VENV)"
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@ls $(WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || { \
	  echo "compiling llama-cpp-python once (about 5 minutes on 2 cores; later installs reuse $(WHEELS))"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --quiet --no-deps --no-cache-dir \
	    --wheel-dir $(WHEELS) '$(LLAMA_REQUIREMENT)'; }
	@echo "installing judgeloop and its pinned dependencies ($(LOCK)) into $(VENV) (about a minute)"
	@$(BIN)/python -m pip install --quiet --prefer-binary --find-links $(WHEELS) -r $(LOCK)
	@$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP)
	@echo "installed: $(VENV) is ready"

# uv resolves one set of versions for every Python pyproject.toml allows (--universal; the fewest
# versions, so 3.11 to 3.13 share numpy's and scipy's), every extra included. Then `make install`.
lock: $(STAMP) ## refresh requirements/lock.txt (every dependency pinned) from pyproject.toml, with uv
	@$(BIN)/python -m uv --version >/dev/null 2>&1 || $(BIN)/python -m pip install --quiet 'uv>=0.5'
	$(BIN)/python -m uv pip compile --quiet --universal --fork-strategy fewest --python-version 3.11 \
	  --extra embedded --extra dev --extra ray pyproject.toml -o $(LOCK)

# ARGS: stages to run (their upstream too), e.g. `make repro ARGS=rag_aggregate`.
repro: $(STAMP) ## run every stage whose code, params or data changed (dvc repro; ARGS: stages)
	@$(JUDGELOOP) repro $(ARGS)

# An experiment of your own: `make exp ARGS="-S refine.threshold=2"` (dvc exp run records the change;
# a failed one puts params.yaml and the outputs back as they were).
exp: $(STAMP) ## an experiment: dvc exp run, the workspace put back if it fails (ARGS="-S key=value")
	@$(JUDGELOOP) exp $(ARGS)

# Re-execute every stage from the recordings alone; no model is called.
replay: $(STAMP) ## every stage again from the recordings alone, byte-identical, no model (ARGS: stages)
	@$(JUDGELOOP) repro --replay $(ARGS)

check: ## does this clone reproduce? every stage replayed in one process, compared with dvc.lock
status: ## the calls the next repro needs, and how many go to the model
audit: ## the recorded calls: exact prompts, replies, scores (ARGS="--item 903 --metric accuracy")
compare: ## two runs side by side (ARGS="HEAD~1 HEAD"; none: the last commit against the workspace)
diff: ## two runs judgement by judgement: what changed, why, is it real (ARGS="workspace runs/paper-sampled")
cache: ## the local cache and the recordings: stats, verify, gc, merge, seed, export
report: ## every design's report pages again, and the index outputs/index.html
calibrate: ## a judge's scores against people's ratings
judge-evaluate: ## judge one RAG answer, or a batch of them
dvc-yaml: ## write dvc.yaml from the designs' stage specs
batch: ## export, run and ingest a batch of calls (OpenAI Batch JSONL; a command or Ray runs it)
check status audit compare diff cache report calibrate judge-evaluate dvc-yaml batch: $(STAMP)
	@$(JUDGELOOP) $@ $(ARGS)

# The committed second run the README's `./judgeloop diff` compares against: the paper's judge asked 3
# times per judgement at temperature 0.7, on the committed assessments (the stages before judge are
# copied). Live on the embedded model (about 15-30 minutes on 2 cores); ARGS=--replay: from its recordings.
SECOND_RUN := runs/paper-sampled
second-run: $(STAMP) ## record runs/paper-sampled, the second run the README's diff reads (ARGS=--replay: no model)
	@$(JUDGELOOP) variant $(SECOND_RUN) --design paper --from judge \
	  -S judge.samples=3 -S judge.combine=mean -S llm.options.temperature=0.7 $(ARGS)

lint: $(STAMP) ## ruff, ruff format --check, mypy (strict), import-linter, xenon (no function past radon grade C)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/xenon --max-absolute C pipeline stages bench tests

test: lint ## lint, then the whole test suite
	$(ON_PATH) $(BIN)/pytest

# Every reader of a file someone else may write, fuzzed (tests/fuzz): EXAMPLES per reader, 10,000 by
# default; `make test` runs the same tests with 50 each. Hypothesis prints each test's example count.
EXAMPLES ?= 10000
fuzz: $(STAMP) ## every reader fuzzed, 10,000 examples each (run by hand, long; EXAMPLES=N)
	JUDGELOOP_FUZZ_EXAMPLES=$(EXAMPLES) $(ON_PATH) $(BIN)/pytest tests/fuzz -q -p no:cacheprovider --hypothesis-show-statistics

bench: $(STAMP) ## the benchmarks (run by hand): cache hit, throughput, storage
	$(BIN)/python bench/cache_overhead.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/storage.py
