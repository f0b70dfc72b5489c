# The two commands a fresh machine needs (README.md):
#   make demo   set up, then submit a kernel on the embedded default and show the ranking
#   make test   set up, then ruff, mypy and the whole test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KC := $(VENV)/bin/kernelcup

.PHONY: setup demo serve test test-fast lint typecheck pytest bench clean

setup: $(VENV)/.installed

# torch is pinned to the CPU build first: any other spelling pulls several GB of CUDA packages.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: setup
	$(KC) list
	$(KC) submit test leaderboards/vectoradd/solutions/pytorch.py
	$(KC) submit ranked leaderboards/vectoradd/solutions/pytorch.py
	-$(KC) submit test leaderboards/vectoradd/solutions/wrong_offbyone.py
	$(KC) show vectoradd

serve: setup
	$(KC) serve

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy

# Two workers, each taking whole test files (--dist loadfile), so a module's fixture, often a batch
# of real harness runs, runs once. Most of the suite waits on subprocesses and servers, so two
# workers pay off even on CI's 2 cores.
pytest: setup
	$(PY) -m pytest -q --durations=25 -n 2 --dist loadfile

test: lint typecheck pytest

# The quick loop while editing: ruff, mypy and the tests that start no harness (the command core,
# the store, the packaging checks): a few minutes. `make test` is what CI runs.
FAST_TESTS := tests/core tests/store tests/packaging
test-fast: lint typecheck
	$(PY) -m pytest -q -n 2 --dist loadfile $(FAST_TESTS)

bench: setup
	$(PY) -m bench.store --db sqlite
	$(PY) -m bench.store --db postgres
	$(PY) -m bench.pipeline

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
