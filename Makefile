# Quick start: `make demo` runs the agent's main job, `make test` runs the tests.
# Both create .venv on first use and install the project with what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format bench deb clean screenshot

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(STAMP)
	$(BIN)/python -m agent.demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

# Relay cost, placement speed and quality; tables on stdout, JSON in bench-results/.
bench: $(STAMP)
	$(BIN)/python -m benchmarks --out bench-results

# The README's machine map (docs/images/machine-map.png): a scenario through
# `simulate --html`, laid out and photographed by headless Chromium (benchmarks/chromium.py).
MAP_SCENARIO ?= docs/images/machine-map.yaml
MAP_PNG ?= docs/images/machine-map.png
MAP_WIDTH ?= 1100
screenshot: $(STAMP)
	page=$$(mktemp --suffix=.html) && \
	$(BIN)/numa-agent simulate $(MAP_SCENARIO) --html "$$page" >/dev/null && \
	$(BIN)/python -m benchmarks.chromium "$$page" $(MAP_PNG) --width $(MAP_WIDTH); \
	rc=$$?; rm -f "$$page"; exit $$rc

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Debian package in dist/: the agent in its own venv at /opt/numa-agent, the unit,
# the default config, the man page (packaging/build_deb.py; needs dpkg-deb, python3.11).
deb: $(STAMP)
	$(BIN)/python packaging/build_deb.py --out dist

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
