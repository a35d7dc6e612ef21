# Two entry points for a fresh machine: `make run` (the main job on its embedded default) and
# `make test` (lint, types, layering and the whole test suite, as CI runs it). Both set
# themselves up. `make check` is the fast tier for every change: everything that needs no
# real component (docs/TESTING.md).
VENV ?= .venv
BIN := $(VENV)/bin
FAKE_NVML := .build/fake-nvml/libnvidia-ml.so.1
CHART_TOOLS := .tools/bin/.installed
# The demo's /metrics port for `make run`; PORT=0 takes any free one.
PORT ?= 9500

# pytest-xdist workers: more than the cores, as many tests wait on a daemon or a clock; tests
# that share one instance of a component stay on one worker.
WORKERS ?= 4
PYTEST := OBSERVER_TEST_FAKE_NVML_LIB=$(CURDIR)/$(FAKE_NVML) $(BIN)/pytest
PARALLEL := -n $(WORKERS) --dist loadgroup
COMPONENTS := slurm slurm24 postgres prometheus rsyslog chromium chart systemd

.PHONY: setup run run-agent check test $(COMPONENTS:%=test-%) lint locale bench chart-tools clean

$(BIN)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/.installed

$(FAKE_NVML): deploy/local/fake_nvml/fake_nvml.c deploy/local/build-fake-nvml.sh
	bash deploy/local/build-fake-nvml.sh

$(CHART_TOOLS): deploy/chart-tools/install.sh | setup
	PYTHON=$(BIN)/python bash deploy/chart-tools/install.sh
	touch $@

chart-tools: $(CHART_TOOLS)

run: setup
	$(BIN)/observer demo --out demo-out --port $(PORT)

run-agent: setup
	$(BIN)/observer agent --config deploy/examples/agent-replay.yaml

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# After editing a .po: the .pot for translators (.build/locale/observer.pot), the catalogue
# check, and the committed .mo the reports read (tests/reports/test_catalogues.py checks both).
locale: setup
	$(BIN)/python deploy/l10n/messages.py extract
	$(BIN)/python deploy/l10n/messages.py check
	$(BIN)/python deploy/l10n/messages.py compile

check: lint $(FAKE_NVML)
	$(PYTEST) $(PARALLEL) -m "not real"

test: lint $(FAKE_NVML) $(CHART_TOOLS)
	$(PYTEST) $(PARALLEL)

# One component's tests, e.g. `make test-slurm` (their fixtures start it: docs/TESTING.md).
$(COMPONENTS:%=test-%): test-%: setup $(FAKE_NVML) $(CHART_TOOLS)
	$(PYTEST) $(PARALLEL) -m $*

bench: setup $(FAKE_NVML)
	OBSERVER_TEST_FAKE_NVML_LIB=$(CURDIR)/$(FAKE_NVML) PYTHONPATH=$(CURDIR) $(BIN)/python bench/agent_sampling.py
	$(BIN)/python bench/detectors.py
	$(BIN)/python bench/scenarios.py
	$(BIN)/python bench/controller_scale.py --http
	$(BIN)/python bench/snapshot_decode.py
	$(BIN)/python bench/report.py

clean:
	rm -rf $(VENV) .build .tools demo-out
