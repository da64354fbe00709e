# Two commands are the contract: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Re-install only when a requirements file changes: runtime for `run`, both for `test`.
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: run test test-fast lint

$(RUNTIME_STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	touch $(RUNTIME_STAMP)

$(DEV_STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	touch $(DEV_STAMP)

# The app and the intake API (http://127.0.0.1:8600) together; Ctrl-C stops both.
run: $(RUNTIME_STAMP)
	$(BIN)/python -m ui.launch --with-api

test: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

# The edit-test loop: no browser journeys, nothing marked slow (run `make test` before a commit).
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -m "not browser and not slow"

lint: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
