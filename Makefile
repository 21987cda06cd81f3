# Two entry points for a fresh machine: `make run` and `make test`.
# Each installs what it needs: a virtualenv at .venv, the Python dependencies at the exact
# versions (and hashes) of requirements.lock, and the Go-built control-plane binaries
# (cached outside the repo). `make lock` refreshes the lock file.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
# The installer and the lock tool are pinned too, so two machines resolve and install alike.
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
# `make lock` moves every pin to the newest version pyproject.toml allows;
# `make lock LOCK_UPGRADE=` keeps the current pins and only re-resolves what pyproject changed.
LOCK_UPGRADE ?= --upgrade
# `make test` runs the suite in this many pytest-xdist workers, each with its own control plane;
# tests/scheduling.py decides which tests go together (README.md, Development).
TEST_WORKERS ?= 3
# How many of the slowest tests `make test` lists (0: every one over 0.005 s).
TEST_DURATIONS ?= 25
# Where `make run` serves the read-only dashboard (docs/dashboard.md).
DASHBOARD_PORT ?= 8090

.PHONY: run run-multicluster test fuzz faults venv binaries peers chromium prometheus redis lint typecheck crds unit integration e2e clean cluster-down lock

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11+)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# The lock carries a hash for every file, so pip refuses anything but the locked builds; the
# package itself goes in afterwards without dependencies, so nothing unlocked slips in.
$(STAMP): $(BIN)/python pyproject.toml $(LOCK)
	$(BIN)/pip install --quiet pip==$(PIP_VERSION)
	$(BIN)/pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $(STAMP)

lock: $(BIN)/python
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip compile pyproject.toml --extra test --universal --python-version 3.11 \
		--generate-hashes --custom-compile-command 'make lock' $(LOCK_UPGRADE) --quiet -o $(LOCK)

venv: $(STAMP)

binaries: $(STAMP)
	$(BIN)/rayquota cluster build

# KubeRay's operator, for the e2e test beside it and the side-by-side benchmark: built once with
# `go` (about 2 minutes cold) and cached beside the control-plane binaries.
peers: binaries
	$(BIN)/rayquota peers build kuberay

# The dashboard's browser tests drive Debian's Chromium (never a browser downloaded by a driver).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null && echo sudo)

chromium: $(CHROMIUM)

$(CHROMIUM):
	@echo "$(CHROMIUM) is missing: installing Debian's chromium for the dashboard's browser tests"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y chromium

# GCS fault tolerance runs on a real Redis: Debian's redis-server (the server users run, with
# redis-cli beside it). Tests start their own on 127.0.0.1 with a password; the package's
# system service is not used.
REDIS_SERVER := /usr/bin/redis-server

redis: $(REDIS_SERVER)

$(REDIS_SERVER):
	@echo "$(REDIS_SERVER) is missing: installing Debian's redis-server for the GCS fault-tolerance tests"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y redis-server

# The dashboard's History-from-Prometheus test scrapes the operator's metrics with Debian's
# Prometheus server.
PROMETHEUS := /usr/bin/prometheus

prometheus: $(PROMETHEUS)

$(PROMETHEUS):
	@echo "$(PROMETHEUS) is missing: installing Debian's prometheus for the dashboard's History test"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends prometheus

run: binaries redis
	$(BIN)/rayquota cluster up
	KUBECONFIG=$$($(BIN)/rayquota cluster kubeconfig) $(BIN)/rayquota install --samples
	@echo "operator starting in the foreground, admission webhooks on 127.0.0.1 (removed on exit); Ctrl-C stops it ('$(BIN)/rayquota cluster down' stops the control plane)"
	@echo "in another shell: eval \"\$$($(BIN)/rayquota cluster env)\"; kubectl get nodes"
	@echo "dashboard: http://127.0.0.1:$(DASHBOARD_PORT)/ (sign-in link: $(BIN)/rayquota dashboard token --url http://127.0.0.1:$(DASHBOARD_PORT))"
	@echo "several clusters (a MultiKueue manager and two workers): make run-multicluster (docs/multicluster.md)"
	KUBECONFIG=$$($(BIN)/rayquota cluster kubeconfig) $(BIN)/rayquota run --dashboard-port $(DASHBOARD_PORT)

# MultiKueue on this machine: a manager and two workers (three local control planes, each with its
# own kwok GPU nodes), then one operator per cluster in the foreground, the manager's dispatching
# to the workers (docs/multicluster.md). '$(BIN)/rayquota multicluster down' stops the clusters.
run-multicluster: binaries
	$(BIN)/rayquota multicluster up
	@echo "apply samples/multicluster/manager.yaml to the manager and a LocalQueue of the same name in each worker"
	$(BIN)/rayquota multicluster run

lint: $(STAMP)
	$(BIN)/ruff check rayquota tests benchmarks
	$(BIN)/mypy --strict rayquota

test: binaries peers chromium prometheus redis
	$(BIN)/ruff check rayquota tests benchmarks
	$(BIN)/mypy --strict rayquota
	$(BIN)/python -m pytest -p no:cacheprovider -q --durations=$(TEST_DURATIONS) -n $(TEST_WORKERS) --dist loadscope tests

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# Fuzzed documents against the real API server (tests/integration/fuzz): `make test` sends 300,
# this nightly-style run FUZZ_EXAMPLES (5,000 by default, about 15-25 minutes).
FUZZ_EXAMPLES ?= 5000

fuzz: binaries
	RAYQUOTA_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -p no:cacheprovider -q tests/integration/fuzz

# The control-plane fault tests alone, with their figures (time to recover, requests in a relist).
faults: binaries
	$(BIN)/python benchmarks/fault_figures.py

crds: $(STAMP)
	$(BIN)/rayquota crds

cluster-down: $(STAMP)
	$(BIN)/rayquota cluster down

clean:
	rm -rf $(VENV) build *.egg-info
