#!/usr/bin/env bash
# Quick start 2: install, then run the whole test suite (pytest + lit/FileCheck IR tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export OPENBLAS_NUM_THREADS=1 PATH="$PWD/.venv/bin:$PATH"
.venv/bin/lit -q tests/filecheck
# pytest-xdist: one worker per core (CI has 2), a test file per worker (its module fixtures
# built once); later arguments win (-n 0: serial)
exec .venv/bin/python -m pytest -q -n "$(nproc)" --dist loadfile "$@"
