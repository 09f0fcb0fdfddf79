# ReGT studio. `make demo` and `make test` are the two Quick start commands; both set up .venv first.
# `make test` leaves out the tests marked slow (golden checks on the real data, load tests) and browser;
# `make test-all` runs every test; CI runs `make test`, then the slow and browser tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup demo test test-all lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel first: otherwise a dependency asking for torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/relabel --workspace demo-workspace demo

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not browser"

test-all: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check relabel db evaluator ui tests bench scripts
	$(BIN)/ruff format --check relabel db evaluator ui tests bench scripts
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) demo-workspace .pytest_cache
