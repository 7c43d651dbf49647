# Quick start: `make train` then `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DEPS := setup.cfg pyproject.toml

.PHONY: venv install install-test train test test-long lint format bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# Stamps make a second run reinstall nothing unless setup.cfg / pyproject.toml changed.
$(VENV)/.installed: $(DEPS) | $(PY)
	$(PIP) install --disable-pip-version-check -q -e .
	touch $@

$(VENV)/.installed-test: $(DEPS) | $(PY)
	$(PIP) install --disable-pip-version-check -q -e '.[test]'
	touch $@ $(VENV)/.installed

venv: $(PY)
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

RUN ?= runs/impala_cartpole
train: install
	$(VENV)/bin/tfv-train --config=impala_cartpole --logdir=$(RUN)
	@echo "Policy exported to $(RUN)/policy (SavedModel). Evaluate it with:"
	@echo "  $(VENV)/bin/tfv-evaluate --policy=$(RUN)/policy --env=CartPole-v1 --episodes=20"

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest -n 2 --dist loadgroup --timeout=900 -q -m "not long" --durations=25

# Tests marked long (command-line twins of faster in-process tests, the guides' code blocks,
# benchmarks' runs): not in CI's budget.
test-long: install-test
	$(PY) -m pytest -n 2 --dist loadgroup --timeout=900 -q -m long

format: install-test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install
	$(PIP) install --disable-pip-version-check -q -e '.[bench]'
	$(PY) benchmarks/ops_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
