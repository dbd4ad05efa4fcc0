# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pip prints a warning per missing local mirror folder on this kind of machine; keep logs readable.
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

# aws-sam-cli pins its own boto3 (1.43.x), click (8.1.8) and pydantic (2.13.x): installed into
# .venv it would downgrade the project's own. It gets a venv of its own inside .venv (so
# `make clean` removes it), from pyproject's `sam` dependency group.
SAM_VENV := $(VENV)/tools/sam
SAM      := $(SAM_VENV)/bin/sam
# The layer's Linux wheels are for this CPU; it must equal the template's Architecture parameter.
ARCHITECTURE ?= arm64
# A CPython 3.13 (Lambda's runtime) compiles the layer's bytecode (layers/memory/Makefile says why):
# python3.13 on PATH, else one pyenv installed; none: a layer without bytecode.
BYTECODE_PYTHON ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
	$$p -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && command -v $$p && break; done)
# sam needs a region to render the template and no telemetry in CI; nothing here talks to AWS.
SAM_ENV  := AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} SAM_CLI_TELEMETRY=0 \
	ARCHITECTURE=$(ARCHITECTURE) PYTHON=$(abspath $(SAM_VENV))/bin/python BYTECODE_PYTHON=$(BYTECODE_PYTHON)

# A venv with nothing but the client's distribution (`pip install ./shared`, no extras), for client-check.
CLIENT_VENV := $(VENV)/tools/client

.PHONY: demo test lint typecheck sam-validate sam-build client-check typescript-check wheel-check docs-check chromium page-screenshots clean help

help:
	@echo "make demo   - set up .venv and run the SVG-editor example on the embedded PostgreSQL"
	@echo "make test   - set up .venv with dev tools and run lint, types, sam validate/build and the whole suite"
	@echo "make sam-build ARCHITECTURE=arm64|x86_64 - build the Lambda layer and functions into .aws-sam/build"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: a floating torch would pull a multi-GB CUDA build.
# The service (.) needs the client's distribution (./shared: the wire contract and the client), which
# no package index carries: both are installed from this checkout.
$(VENV)/.local-installed: pyproject.toml shared/pyproject.toml | $(BIN)/python
	$(PIP) install 'torch==2.13.0'
	$(PIP) install -e ./shared -e '.[local]'
	@touch $@

$(VENV)/.dev-installed: pyproject.toml shared/pyproject.toml $(VENV)/.local-installed
	$(PIP) install -e ./shared -e '.[local,dev]'
	@touch $@

$(SAM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --upgrade-deps $(SAM_VENV) >/dev/null
	$(SAM_VENV)/bin/python -m pip --disable-pip-version-check -q install --group sam
	@touch $@

# cfn-lint over the transformed template: offline, no AWS account needed.
sam-validate: $(SAM_VENV)/.installed
	$(SAM_ENV) $(SAM) validate --lint

# Builds the layer (pip downloads Linux wheels) and the functions into .aws-sam/build;
# samconfig.toml makes it cached and parallel.
sam-build: $(SAM_VENV)/.installed
	$(SAM_ENV) $(SAM) build

demo: $(VENV)/.local-installed
	$(BIN)/agent-memory demo

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy
	@# One run per handler: each is a module named app, which one mypy run cannot hold twice.
	for handler in functions/*/app.py; do $(BIN)/mypy $$handler || exit 1; done

# The client installs from this checkout into a fresh venv with only its own dependencies (no
# psycopg, numpy, torch or Powertools) and works against `agent-memory serve`.
client-check: $(VENV)/.dev-installed
	rm -rf $(CLIENT_VENV)
	$(PYTHON) -m venv $(CLIENT_VENV)
	$(CLIENT_VENV)/bin/python -m pip --disable-pip-version-check -q install ./shared
	$(BIN)/python tests/client/check.py $(abspath $(CLIENT_VENV))/bin/python

# The TypeScript package (npm `rushmem`, shared/typescript): installed from its lock file, built,
# type-checked, and its tests run by Node's test runner against `agent-memory serve` (this venv's),
# which each test file starts on a free port with a database of its own.
TS_DIR := shared/typescript
typescript-check: $(VENV)/.dev-installed
	@command -v npm >/dev/null || (echo "make typescript-check needs Node.js 20+ and npm" >&2; exit 1)
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS_DIR) && npm run build
	cd $(TS_DIR) && npm run typecheck
	cd $(TS_DIR) && AGENT_MEMORY_PYTHON=$(abspath $(BIN))/python npm test

# The server's wheels (. and ./shared) in a fresh venv outside the checkout, first without the local
# model (torch): `agent-memory serve`, `invoke` and `demo` run from an empty directory with the template,
# the handlers and the events the wheel carries; then the same venv gets the `local` extra (torch
# pinned first, as in .local-installed) and runs the README's four lines of Python, no server, on the
# default local model (tests/client/wheel_check.py). pip's cache keeps it quick.
WHEEL_DIR   := $(VENV)/tools/wheels
SERVER_VENV := $(or $(TMPDIR),/tmp)/agent-memory-wheel-check-venv
wheel-check: $(VENV)/.dev-installed
	rm -rf $(WHEEL_DIR) $(SERVER_VENV) build shared/build
	$(PIP) wheel --no-deps -w $(WHEEL_DIR) ./shared .
	$(PYTHON) -m venv $(SERVER_VENV)
	$(SERVER_VENV)/bin/python -m pip --disable-pip-version-check -q install $(WHEEL_DIR)/agent_memory_client-*.whl \
		"$$(ls $(WHEEL_DIR)/agent_memory-*.whl)[serve]"
	$(BIN)/python tests/client/wheel_check.py $(SERVER_VENV)
	$(SERVER_VENV)/bin/python -m pip --disable-pip-version-check -q install 'torch==2.13.0'
	$(SERVER_VENV)/bin/python -m pip --disable-pip-version-check -q install "$$(ls $(WHEEL_DIR)/agent_memory-*.whl)[local]"
	$(BIN)/python tests/client/wheel_check.py --four-lines $(SERVER_VENV)
	rm -rf $(SERVER_VENV)

# Debian's headless chromium and its chromedriver, installed when missing (no browser download of
# its own: the machines reach package registries only). The memory page's tests (tests/browser)
# drive them through selenium.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -q && apt-get install -y -q chromium chromium-driver)

# The Swagger page of `agent-memory serve` rendered by a real headless browser (not part of
# `make test`: see docs/api.md).
docs-check: $(VENV)/.dev-installed chromium
	$(BIN)/python tests/client/docs_check.py

# The memory page's screenshots in docs/ (docs/page.md), taken by its browser tests.
page-screenshots: $(VENV)/.dev-installed chromium
	PAGE_SCREENSHOTS=$(abspath docs) $(BIN)/pytest tests/browser -q

# The tests under tests/deploy read the built layer (SAM_BUILD_DIR) and fail if it is missing.
test: lint typecheck sam-validate sam-build client-check typescript-check wheel-check chromium
	SAM_BUILD_DIR=.aws-sam/build $(BIN)/pytest

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache $(TS_DIR)/node_modules $(TS_DIR)/dist $(TS_DIR)/.test-build
