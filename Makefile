# trajforge: `make demo` runs the whole graph on the embedded sandbox,
# `make test` runs the suite. Both set up what they need first (idempotent).
.PHONY: setup setup-test demo test lint bench dev clean

setup:
	@bash scripts/setup.sh

# The demo's set-up plus the trainers' venvs (.venv-trainers, .venv-llamafactory).
setup-test:
	@bash scripts/setup_test.sh

demo: setup
	@.venv/bin/python scripts/demo.py

# Two workers, one test file each at a time (module fixtures stay shared): the
# tests wait on Chromium and Appium as much as they compute. A fixed hash seed
# keeps the workers' collection order identical (sets in parametrize lists).
test: setup-test lint
	@PYTHONHASHSEED=0 .venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=25

lint: setup
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .

# Every benchmark against its same-run baseline; rewrites docs/benchmarks.md.
bench: setup
	@.venv/bin/python benchmarks/run_all.py

dev: setup
	@mkdir -p .dagster_home && DAGSTER_HOME=$$PWD/.dagster_home .venv/bin/dagster dev -w workspace.yaml

clean:
	rm -rf data .dagster_home
