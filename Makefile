# Ichor — every command a person or CI needs. `make test` works on a fresh machine:
# it creates the venv, builds (or reuses) the cached test binaries, then lints,
# type-checks, checks the import layers and runs every test.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export ICHOR_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ichor
export GOTOOLCHAIN := local
STAMP := $(VENV)/.installed

.PHONY: help venv lint typecheck imports check unit component e2e test testenv oracle printable \
        bench demo demo-down cluster-up cluster-down image image-base clean node compat-json \
        runtime-deps configuration chart-readme ui ui-unit ui-package ui-screenshots docs \
        hooks complexity

help:
	@echo "The two commands:"
	@echo "  make demo          the whole upgrade story, its Jobs run on a one-node Kubernetes (make demo-down stops it)"
	@echo "  make test          make check, then every test tier (builds the test binaries once)"
	@echo "Checks and test tiers:"
	@echo "  make check         lint, typecheck, imports and complexity"
	@echo "  make lint          ruff check and ruff format --check"
	@echo "  make typecheck     mypy --strict"
	@echo "  make imports       import-linter's layer contracts"
	@echo "  make complexity    no function in ichor/ above cyclomatic complexity 15 (radon)"
	@echo "  make unit          the pure tests only (seconds, no I/O)"
	@echo "  make component     kopf, the chart and the lister against a real API server and registry"
	@echo "  make e2e           make demo's script end to end"
	@echo "  make node          the node tier only: the chart and the operator's Jobs on a real node"
	@echo "  make bench         speed and memory figures, as ratios"
	@echo "What the tests run (cached under ~/.cache/ichor):"
	@echo "  make testenv       build/cache kube-apiserver, etcd, kubectl, helm, crane, registry, the"
	@echo "                     one-node Kubernetes (kubelet, controller-manager, scheduler, kube-proxy,"
	@echo "                     containerd, talosctl; runc, CNI plugins, iptables, conntrack, jq from Debian)"
	@echo "                     and the test-only Go programs of tests/gotools (kstatus, gowebhook)"
	@echo "  make oracle        the Go program that answers as upstream Talos machinery does"
	@echo "  make printable     rewrite ichor/release/go_printable.py from the oracle"
	@echo "  make compat-json   rewrite tests/gotools/compat.json (the table the Go webhook reads)"
	@echo "  make configuration rewrite docs/configuration.md's tables from ichor/settings.py"
	@echo "  make docs          rewrite every generated page: troubleshooting, compatibility, metrics, settings"
	@echo "  make chart-readme  rewrite charts/ichor/README.md from the chart's values schema"
	@echo "  make image         the operator image (Docker engine or buildah; IMAGE_OUTPUT=, IMAGE_PUSH=)"
	@echo "  make image-base    the image tools and the Debian base the image test builds on"
	@echo "  make runtime-deps  pyproject's runtime dependencies alone, the venv the wheel test imports with"
	@echo "The Headlamp plugin (ui/headlamp):"
	@echo "  make ui            npm ci from the lockfile, the plugin, the browser test's page; Debian's chromium"
	@echo "  make ui-unit       its type check, lint and Vitest tests (mappings, stories as snapshots, axe-core)"
	@echo "  make ui-package    the archive Headlamp installs, its sha256 and the Artifact Hub manifest"
	@echo "  make ui-screenshots  the browser test, its screenshots written to docs/ui/"
	@echo "For a person:"
	@echo "  make cluster-up    a local control plane named dev (make cluster-down stops it)"
	@echo "  make venv          the virtual environment .venv"
	@echo "  make hooks         the git hooks of hack/hooks for this clone (commit-msg: subject <= 72)"
	@echo "  make clean         remove .venv and the caches of the tools"
	@echo "  make help          this list"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

# The project's git hooks (hack/hooks; commit-msg checks the subject and the blank line).
# core.hooksPath is relative, so every worktree of the clone runs its own checkout's hooks.
hooks:
	git config core.hooksPath hack/hooks
	@echo "git runs hack/hooks now (git config --unset core.hooksPath to stop)"

lint: $(STAMP)
	$(BIN)/ruff check ichor tests
	$(BIN)/ruff format --check ichor tests

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# Every function of ichor/ at cyclomatic complexity 15 or less, but for the listed ones
# (tests/support/complexity.py), which may not grow.
complexity: $(STAMP)
	$(BIN)/python -m tests.support.complexity

check: lint typecheck imports complexity

unit: $(STAMP)
	$(BIN)/pytest -q -rs tests/unit

testenv:
	@bash hack/testenv.sh

oracle:
	@bash hack/oracle.sh

# Go's printable characters (the %q table of parse errors) from the oracle, committed as
# ichor/release/go_printable.py; the differential test checks it against the oracle. On a
# Python of Unicode 14.0.0, also tests/differential/unicode14_printable.py, the reference
# the differential test's quoting cases are derived from (kept as committed otherwise).
printable: $(STAMP) oracle
	$(BIN)/python hack/printable.py

# The compatibility table as JSON (tests/gotools/compat.json), which the Go admission
# webhook of tests/gotools reads; a unit test fails while it differs from ichor/release.
compat-json: $(STAMP)
	$(BIN)/python hack/compat_json.py

component: $(STAMP) testenv
	$(BIN)/pytest -q -rs tests/component

e2e: $(STAMP) testenv
	$(BIN)/pytest -q -rs tests/e2e

node: $(STAMP) testenv
	$(BIN)/pytest -q -rfEs tests/node

# --durations: the slowest tests in the log, where CI's budget goes (docs/development.md)
test: check testenv oracle image-base runtime-deps ui
	@bash hack/ui.sh unit
	$(BIN)/pytest -q -rfEs --durations=15 tests

# The Headlamp plugin (docs/ui.md): `make ui` builds what tests/component/ui needs.
ui:
	@bash hack/ui.sh build

# The browser test's screenshots, written to docs/ui/ (make test keeps them in build/).
ui-screenshots: $(STAMP) testenv ui
	ICHOR_UI_SCREENSHOTS=$(CURDIR)/docs/ui $(BIN)/pytest -q tests/component/ui/test_headlamp_plugin.py

ui-unit:
	@bash hack/ui.sh unit

ui-package:
	@bash hack/ui.sh package

bench: $(STAMP) testenv oracle
	$(BIN)/python -m tests.bench

# docs/configuration.md's tables, from ichor/settings.py (a unit test keeps them equal).
configuration: $(STAMP)
	$(BIN)/python -m tests.support.configuration docs/configuration.md

# Every generated part of docs/ (the reasons, the compatibility table, the metrics, the
# settings), from the code; the unit tests of tests/unit/docs keep each equal.
docs: $(STAMP)
	$(BIN)/python -m tests.support.pages
# charts/ichor/README.md, from values.schema.json's descriptions and values.yaml's defaults
# (a unit test keeps them equal).
chart-readme: $(STAMP)
	$(BIN)/python -m tests.support.chart_readme charts/ichor/README.md

# The runtime dependencies alone (no [dev]), cached: the wheel test imports the wheel with them.
runtime-deps: $(STAMP)
	@$(BIN)/python -m tests.harness.wheel deps

demo: $(STAMP) testenv
	$(BIN)/python -m tests.harness.demo

demo-down: $(STAMP)
	$(BIN)/python -m tests.harness.stack down --name demo

cluster-up: $(STAMP) testenv
	$(BIN)/python -m tests.harness.stack up --name dev

cluster-down: $(STAMP)
	$(BIN)/python -m tests.harness.stack down --name dev

# The operator image (hack/image.sh): the Docker engine when one answers, else buildah
# (installed from Debian), on the Dockerfile's pinned base or, when that cannot be pulled,
# one made here from Debian's packages (cached). IMAGE_OUTPUT=PATH also writes an OCI
# archive; IMAGE_PUSH=host:port/repo:tag also pushes it. IMAGE_ENGINE, IMAGE_BASE: see the
# script.
IMAGE_REPOSITORY := ghcr.io/ichor-dev/ichor-operator
IMAGE_TAG := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
image:
	@IMAGE=$(IMAGE_REPOSITORY):$(IMAGE_TAG) bash hack/image.sh build

# The image tools and the Debian base the image test builds on (cached; `make test` needs it).
image-base:
	@IMAGE_ENGINE=buildah bash hack/image.sh base >/dev/null

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -rf ui/headlamp/node_modules ui/headlamp/dist ui/headlamp/build
