# Quick start: `make demo` runs the agent's main job, `make test` runs the tests.
# Both create .venv on first use and install the project with what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
INSTALL_LOG := $(VENV)/install.log

.PHONY: demo test test-stress lint format bench deb clean screenshot

# pip's and setuptools' chatter goes to $(INSTALL_LOG), shown only if the install fails.
# setuptools>=77 in the venv too: `make deb` builds the wheel without build isolation.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing numa-agent and its development tools into $(VENV) (log: $(INSTALL_LOG))"
	@{ $(BIN)/python -m pip install --upgrade pip 'setuptools>=77' && \
	   $(BIN)/python -m pip install -e '.[test]'; } >$(INSTALL_LOG) 2>&1 || \
	 { cat $(INSTALL_LOG); echo "make: installing into $(VENV) failed; log: $(INSTALL_LOG)" >&2; exit 1; }
	@touch $@

# The demo is development tooling (devtools/), run from the checkout; it is not installed.
demo: $(STAMP)
	$(BIN)/python -m devtools.demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The suite STRESS_RUNS times in a row while every CPU is kept busy (devtools/busy.py:
# one busy loop per CPU, stopped however the run ends), stopping at the first failure.
# A test that passes only on an idle machine fails here.
STRESS_RUNS ?= 3
test-stress: $(STAMP)
	@for run in $$(seq 1 $(STRESS_RUNS)); do \
	  echo "test-stress: run $$run of $(STRESS_RUNS), every CPU busy"; \
	  began=$$(date +%s); \
	  $(BIN)/python -m devtools.busy -- $(BIN)/python -m pytest -x $(PYTEST_ARGS); rc=$$?; \
	  took=$$(( $$(date +%s) - began )); \
	  if [ $$rc -ne 0 ]; then \
	    echo "test-stress: run $$run of $(STRESS_RUNS) FAILED (exit $$rc, after $${took} s)" >&2; \
	    exit $$rc; \
	  fi; \
	  echo "test-stress: run $$run of $(STRESS_RUNS) passed in $${took} s"; \
	done; \
	echo "test-stress: all $(STRESS_RUNS) runs passed"

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
