# Two commands on a fresh machine (Python 3.11 + pip):
#   make replicate   # venv + pinned deps, then the default replication (embedded scale)
#   make test        # venv + pinned deps, then the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Snakemake cores for `make replicate`: two jobs per core. Each run's start-up (the launcher's
# imports, ~4 s) is single-threaded, so two runs side by side keep both cores busy (README).
CORES  ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 2) )))

.PHONY: install test test-fast replicate dry-run bench clean-results

$(STAMP): env/requirements.txt env/requirements-build.txt env/requirements-fairseq.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r env/requirements.txt
	$(BIN)/pip install -q -r env/requirements-build.txt
	$(BIN)/pip install -q --no-build-isolation -r env/requirements-fairseq.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q

test-fast: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -m "not slow"

replicate: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile env/profiles/local --cores $(CORES)

dry-run: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile env/profiles/local -n

bench: $(STAMP)
	$(BIN)/python benchmarks/harness_overhead.py
