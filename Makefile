# Quick start: `make demo` runs the agent's main job, `make test` runs the tests.
# Both create .venv on first use and install the project with what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench deb clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# The demo is development tooling (devtools/), run from the checkout; it is not installed.
demo: $(STAMP)
	$(BIN)/python -m devtools.demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

# Relay cost, placement speed and quality; tables on stdout, JSON in bench-results/.
bench: $(STAMP)
	$(BIN)/python -m benchmarks --out bench-results

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Debian package in dist/: the agent in its own venv at /opt/numa-agent, the unit,
# the default config, the man page (packaging/build_deb.py; needs dpkg-deb, python3.11).
deb: $(STAMP)
	$(BIN)/python packaging/build_deb.py --out dist

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
