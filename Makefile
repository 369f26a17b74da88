# The two commands of the README's quick start. Each sets up .venv on first use.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check bench

$(BIN)/tracker: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/tracker
	$(BIN)/tracker demo

test: $(BIN)/tracker
	$(BIN)/python -m pytest -n auto  # one worker per core; no test depends on speed or order

check: $(BIN)/tracker
	$(BIN)/ruff check tracker
	$(BIN)/ruff format --check tracker
	$(BIN)/mypy tracker

bench: $(BIN)/tracker
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_claims.py
