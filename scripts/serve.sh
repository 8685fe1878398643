#!/usr/bin/env bash
# The one command that installs the service into ./.venv and starts it on its defaults:
# http://127.0.0.1:8000, models under ./var/models, no other server. BSVM_* variables apply.
# The install runs only when what it depends on changed (the Python, pyproject.toml,
# constraints.txt: their digest is kept in .venv/bsvm-install.stamp), so a second start goes
# straight to the server; the install is editable, so a change to the source needs none.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
fi
STAMP=.venv/bsvm-install.stamp
WANT=$( { .venv/bin/python -VV; cat pyproject.toml constraints.txt; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[service]"
    echo "$WANT" > "$STAMP"
fi
exec .venv/bin/python -m service
