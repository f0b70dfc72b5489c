#!/bin/sh
# Every GPU check and benchmark of the harness in one call; see bench/gpu/run_all.py.
# Usage: OUT=/some/dir bench/gpu/run_all.sh [--sections ...] [--budget-s N]
set -eu
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" bench/gpu/run_all.py "$@"
