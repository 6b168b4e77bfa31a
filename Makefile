# `make test` creates .venv, installs the package with its test extras and runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,redis]"
	touch $@

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# All benchmarks and the cross-check (bench_budget.py needs redis-server on the PATH).
bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/crosscheck.py
	$(BIN)/python benchmarks/bench_crawl.py
	$(BIN)/python benchmarks/bench_budget.py

lint: $(VENV)/.installed
	$(BIN)/python -m pip install -q ruff mypy types-PyYAML
	$(BIN)/ruff check scrapy_rfc9309 tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
