# The two commands of the README's quick start. Each sets up .venv on first use, from the lock.
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
UV_VERSION := 0.13.9

.PHONY: demo test check lock cli-docs bench

# uv installs the locked set in seconds; where uv cannot be installed or fails, pip installs the
# same pins (a fully pinned set gives pip's resolver nothing to backtrack through). Both write
# bytecode, and so does compileall for the tracker's own (editable) modules: where Python writes
# none itself (PYTHONDONTWRITEBYTECODE, read-only installs) each command would compile its
# libraries again, 2-3x its CPU (bench/bench_startup.py).
define install
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python --constraint $(LOCK) $(1) \
		|| $(BIN)/python -m pip install --quiet --constraint $(LOCK) $(1)
	$(BIN)/python -m compileall -q tracker
endef

# What the demo needs: the package and its dependencies, not the test extras.
$(VENV)/.installed-demo: pyproject.toml $(LOCK)
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION) \
		|| echo "uv could not be installed; pip installs from $(LOCK) instead"
	$(call install,-e .)
	touch $@

# The test extras, added to the same venv.
$(VENV)/.installed-test: $(VENV)/.installed-demo
	$(call install,-e '.[test]')
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/tracker demo

# One worker per core (PYTEST_XDIST_AUTO_NUM_WORKERS overrides it), or WORKERS=N; no test
# depends on speed or order; a worker that runs out of tests takes some of another's (worksteal), so
# the slowest tests do not end the run on one core.
WORKERS ?= auto
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n $(WORKERS) --dist worksteal

# docs/cli.md is typer's own help, generated; a help text changed without `make cli-docs` fails a
# test (tests/test_architecture.py).
CLI_DOCS = $(BIN)/typer tracker.cli utils docs --name tracker --title "tracker: command reference"

check: $(VENV)/.installed-test
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy tracker

cli-docs: $(VENV)/.installed-demo
	$(CLI_DOCS) --output docs/cli.md

# Refresh the lock after editing pyproject.toml's dependencies (kept pins stay where they still
# fit; add --upgrade to move every pin to the newest release).
lock: $(VENV)/.installed-demo
	$(BIN)/uv pip compile --quiet --universal --all-extras pyproject.toml -o $(LOCK)

bench: $(VENV)/.installed-test
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_claims.py
