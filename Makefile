# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pip prints a warning per missing local mirror folder on this kind of machine; keep logs readable.
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck unit integration clean help

help:
	@echo "make demo   - set up .venv and run the SVG-editor example on the embedded PostgreSQL"
	@echo "make test   - set up .venv with dev tools and run lint, types and the whole suite"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: a floating torch would pull a multi-GB CUDA build.
$(VENV)/.local-installed: pyproject.toml | $(BIN)/python
	$(PIP) install 'torch==2.13.0'
	$(PIP) install -e '.[local]'
	@touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.local-installed
	$(PIP) install -e '.[local,dev]'
	@touch $@

demo: $(VENV)/.local-installed
	$(BIN)/agent-memory demo

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
