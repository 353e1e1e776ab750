# powerkit — every target works on a fresh clone; .venv/ is created on demand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-all demo bench lint samples docs goldens clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

# the slow tests (a real Ray cluster, a real Prometheus server, the README tour) run in CI
# (CI=true) and with test-all. The package's bytecode is written first (only what changed):
# the suite starts hundreds of powerkit processes, and where PYTHONDONTWRITEBYTECODE is set
# each would compile every module it imports anew.
test: install
	$(BIN)/python -m compileall -q powerkit
	$(BIN)/python -m pytest $(if $(CI),,-m "not slow")

test-all: install
	$(BIN)/python -m compileall -q powerkit
	$(BIN)/python -m pytest

# each command's document and table on the sample data (tests/goldens/); review the diff
goldens: install
	$(BIN)/python tests/goldens/make.py

# the worked outputs in docs/ made anew from the commands (docs/outputs.py), its figures
# (docs/figures.py), the documents' JSON Schemas (docs/schemas/) and README's layout block; review the diff
docs: install
	$(BIN)/python docs/outputs.py
	$(BIN)/python docs/figures.py
	$(BIN)/python -m tests.core.test_schemas
	$(BIN)/python tests/test_layers.py

lint: install
	$(BIN)/ruff check powerkit tests bench sample_data docs/outputs.py docs/figures.py
	$(BIN)/ruff format --check powerkit tests bench sample_data docs/outputs.py docs/figures.py
	$(BIN)/mypy

demo: install
	bash sample_data/demo.sh

samples: install
	bash sample_data/regenerate.sh

# (bytecode first, as for test: a figure must not include compiling the package)
bench: install
	$(BIN)/python -m compileall -q powerkit
	$(BIN)/python bench/bench_foundation.py
	$(BIN)/python bench/bench_windows.py
	$(BIN)/python bench/bench_import.py
	$(BIN)/python bench/bench_control.py
	$(BIN)/python bench/bench_pfi.py
	$(BIN)/python bench/bench_memory.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_bloat.py
	$(BIN)/python bench/bench_prometheus.py
	$(BIN)/python bench/bench_scale.py
	$(BIN)/python bench/bench_utility.py
	$(BIN)/python bench/bench_cap.py
	$(BIN)/python bench/bench_monitor.py
	$(BIN)/python bench/bench_limits.py
	$(BIN)/python bench/bench_top.py
	$(BIN)/python bench/bench_jobs.py
	$(BIN)/python bench/sensor_truth.py

clean:
	rm -rf $(VENV) build *.egg-info demo_out .pytest_cache .mypy_cache .ruff_cache
