# `make demo` runs the example project's demo crawl; `make test` runs the suite.
# Both create .venv and install the package (with its test extras) on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

MIN_VENV ?= .venv-min
# The interpreters of test-min and test-newest (.ci/run gives the lowest and the
# newest supported Python it finds).
MIN_PYTHON ?= $(PYTHON)
NEWEST_PYTHON ?= $(PYTHON)

# Cleared (an environment may set it) for pip and for the suite, so that installed
# packages are compiled once and the suite's many subprocess crawls reuse the bytecode.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test test-fast test-min test-newest bench lint clean wheel fleet-demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,redis]"
	touch $@

demo: $(VENV)/.installed
	cd example_project && $(abspath $(BIN))/scrapy crawl demo

# Parallel: `--dist loadgroup` (no test names a group) hands each worker a test
# or two at a time, in the suite's order (tests/conftest.py: the tests that mostly
# wait spread among those that use the CPU).  Twelve workers on two cores: most
# tests wait on a site or a crawl's idle close, not on the CPU (crawler processes
# are forked, tests/processes.py).  With 953 tests, taken in turn on a quiet
# machine: 119 and 118 s with 12 workers, 110 and 108 s with 16, 111 and 107 s
# with 20.  More workers load the machine more, and the broad crawls' tests need
# their sites' answers to come in the order they set up: with 16, one of them
# failed in one of two CI runs (no page was handed back: the holds it sets up did
# not come before the links it expects them to hold), with 24 two of them in one
# run of four.  Starting the
# workers (each collects the suite) takes 1.7 s of CPU each.  The quick loop's
# tests use the CPU throughout, and run best with 4 (13 s; 20 s with 6).
XDIST := -n 12 --dist loadgroup
FAST_XDIST := -n 4 --dist loadgroup

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# The quick loop: no slow, Redis or subprocess test, and a tenth of each property
# test's examples (TESTS_QUICK, see tests/helpers.py); `make test` runs them all.
test-fast: $(VENV)/.installed
	TESTS_QUICK=1 $(BIN)/python -m pytest $(FAST_XDIST) -m "not slow and not redis and not subprocess" $(PYTEST_ARGS)

# The suite against the lowest supported versions (.ci/min-versions.txt).
$(MIN_VENV)/.installed: setup.cfg pyproject.toml .ci/min-versions.txt
	$(MIN_PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q --upgrade pip
	$(MIN_VENV)/bin/python -m pip install -q -e ".[test,redis]" -c .ci/min-versions.txt
	touch $@

test-min: $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/python -c "import platform, scrapy; print('Python', platform.python_version(), 'Scrapy', scrapy.__version__)"
	$(MIN_VENV)/bin/python -m pytest $(XDIST) $(PYTEST_ARGS)

# The suite against the newest Scrapy on the package index, pre-releases included:
# a release that changes an interface the components use fails here before users
# meet it.
NEWEST_VENV ?= .venv-newest
test-newest:
	$(NEWEST_PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(NEWEST_VENV)/bin/python -m pip install -q -e ".[test,redis]"
	$(NEWEST_VENV)/bin/python -m pip install -q --upgrade --pre scrapy
	$(NEWEST_VENV)/bin/python -c "import platform, scrapy; print('Python', platform.python_version(), 'Scrapy', scrapy.__version__)"
	$(NEWEST_VENV)/bin/python -m pytest $(XDIST) $(PYTEST_ARGS)

# All benchmarks and the cross-check (bench_budget.py and bench_fleet.py need redis-server).
# Every benchmark and the cross-check, their output written to docs/benchmark-results.md
# (the file the docs link; commit it when it is refreshed). bench_budget and
# bench_fleet need redis-server.
BENCHMARKS := bench_core.py crosscheck.py bench_crawl.py bench_budget.py bench_hostile.py bench_fleet.py bench_fleet_network.py

bench: $(VENV)/.installed
	{ echo "# Benchmark results"; echo; \
	  echo "Printed by \`make bench\` on $$(date -u +%F), $$(nproc) cores, Python $$($(BIN)/python -c 'import platform; print(platform.python_version())')."; \
	  for script in $(BENCHMARKS); do \
	    echo; echo "## \`python benchmarks/$$script\`"; echo; echo '```'; \
	    $(BIN)/python benchmarks/$$script || exit 1; \
	    echo '```'; \
	  done; } > docs/benchmark-results.md.tmp
	mv docs/benchmark-results.md.tmp docs/benchmark-results.md

lint: $(VENV)/.installed
	$(BIN)/python -m pip install -q ruff==0.17.6 mypy==2.4.1 types-PyYAML==6.0.12.20261113
	$(BIN)/ruff check scrapy_rfc9309 tests benchmarks example_project
	$(BIN)/ruff format --check scrapy_rfc9309 tests benchmarks example_project
	$(BIN)/mypy

# An installable wheel in dist/ (pip install dist/scrapy_rfc9309-*.whl).
wheel: $(VENV)/.installed
	$(BIN)/python -m pip wheel -q --no-deps -w dist .

# Two crawler processes of the example project sharing one local redis-server.
fleet-demo: $(VENV)/.installed
	cd example_project && $(abspath $(BIN))/python -m demo.fleet

clean:
	rm -rf $(VENV) $(MIN_VENV) $(NEWEST_VENV) build dist *.egg-info .pytest_cache .hypothesis
