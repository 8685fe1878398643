#!/usr/bin/env bash
# The one command that installs the service into ./.venv and starts it on its defaults:
# http://127.0.0.1:8000, models under ./var/models, no other server. BSVM_* variables apply.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[service]"
exec .venv/bin/python -m service
