#!/bin/sh
# The core's own packages as wheels for the GPU machine, which has torch and Triton but none of
# these and no package registry (bench/gpu/README in run_all.py's docstring): the compatibility
# suites (tests/compat, bench/gpu/gpumode_compat.py) build job specs with the core's code.
# The CLI's own (typer, rich, APScheduler and theirs) too, for bench/cli_latency.py there.
# Run here, from the repository root; versions are the dev venv's. Then, on the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl   (bytecode too, as a user's install)
#   export PYTHONPATH=/tmp/site
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p .whl
pins=$("$PY" -m pip freeze 2>/dev/null | grep -iE '^(sqlmodel|sqlalchemy|pydantic|pydantic[-_]core|typing[-_]inspection|annotated[-_]types|pyyaml|structlog|alembic|mako|markupsafe|greenlet|typing[-_]extensions|pytest|pluggy|iniconfig|packaging|pytest[-_]timeout|pytest[-_]asyncio|typer|annotated[-_]doc|click|rich|markdown[-_]it[-_]py|mdurl|pygments|shellingham|apscheduler|tzlocal)==')
for pin in $pins; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$pin"
done
ls .whl
