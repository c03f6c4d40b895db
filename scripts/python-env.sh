#!/usr/bin/env bash
# Make (or reuse) the Python venv for the Python package's build and tests
# and print its path. Installs crates/ctxpress-py/requirements-dev.txt from
# PyPI; kept between runs on a machine (CTXPRESS_PY_VENV, default
# ~/.cache/ctxpress/py-venv) and reinstalled when that file changes.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${CTXPRESS_PY_VENV:-$HOME/.cache/ctxpress/py-venv}"
req=crates/ctxpress-py/requirements-dev.txt
python="${PYTHON:-python3}"
stamp="$venv/.ctxpress-requirements"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -r "$req" >&2
  cp "$req" "$stamp"
fi
echo "$venv"
