# Two commands for a new user: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test demo bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,redis]"
	touch $@

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(VENV)/.installed
	cd example_project && ../$(BIN)/scrapy crawl demo

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_core.py

lint: $(VENV)/.installed
	$(BIN)/python -m pip install -q ruff mypy types-PyYAML
	$(BIN)/ruff check scrapy_rfc9309 tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
