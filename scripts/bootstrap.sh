#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install ascendir with its test extra; a no-op when
# pyproject.toml has not changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.13 python3.12 python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then PY=$c; break; fi
  done
fi
[ -n "$PY" ] || { echo "error: Python >= 3.11 not found" >&2; exit 2; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.ascendir-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
  echo "$want" > "$stamp"
fi
