# Two entry points for a fresh machine: `make run` and `make test`.
# Each installs what it needs: a virtualenv at .venv, the Python dependencies,
# and the Go-built control-plane binaries (cached outside the repo).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test venv binaries lint typecheck crds unit integration e2e clean cluster-down

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11+)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

binaries: $(STAMP)
	$(BIN)/rayquota cluster build

run: binaries
	$(BIN)/rayquota cluster up
	KUBECONFIG=$$($(BIN)/rayquota cluster kubeconfig) $(BIN)/rayquota install --samples
	@echo "operator starting in the foreground; Ctrl-C stops it ('$(BIN)/rayquota cluster down' stops the control plane)"
	@echo "in another shell: eval \"\$$($(BIN)/rayquota cluster env)\"; kubectl get nodes"
	KUBECONFIG=$$($(BIN)/rayquota cluster kubeconfig) $(BIN)/rayquota run

lint: $(STAMP)
	$(BIN)/ruff check rayquota tests benchmarks
	$(BIN)/mypy rayquota/queueing rayquota/operator/core

test: binaries
	$(BIN)/ruff check rayquota tests benchmarks
	$(BIN)/mypy rayquota/queueing rayquota/operator/core
	$(BIN)/python -m pytest -p no:cacheprovider -q tests

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

crds: $(STAMP)
	$(BIN)/rayquota crds

cluster-down: $(STAMP)
	$(BIN)/rayquota cluster down

clean:
	rm -rf $(VENV) build *.egg-info
