#!/usr/bin/env bash
# The one command that installs everything into ./.venv and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# one BLAS thread: steadier, and faster for the many small solves of the suite on 2 cores
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# bytecode is cached: every server, forkserver worker and Dask worker the suite starts imports
# service/ and bsvm_core/ (~0.45 CPU s each to compile) and pytest's workers rewrite the tests
unset PYTHONDONTWRITEBYTECODE
# lets scikit-learn's estimator checks run their array-API input check instead of skipping it
export SCIPY_ARRAY_API=1
# the PostgreSQL server binaries (initdb, pg_ctl): the registry tests start a real server
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        echo "the tests need the PostgreSQL server binaries (initdb, pg_ctl): install postgresql" >&2
        exit 1
    fi
fi
# headless Chromium for the /docs browser test (driven by Playwright; never `playwright install`)
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "the tests need a headless browser at /usr/bin/chromium: install chromium" >&2
        exit 1
    fi
fi
# podman, runc and mmdebstrap for the container test (tests/service/app/test_container.py): it
# builds the Dockerfile on a local stand-in base and runs the image on the host's network
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 \
    || ! command -v mmdebstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            podman buildah runc mmdebstrap >/dev/null
    else
        echo "the container test needs podman, runc and mmdebstrap: install them" >&2
        exit 1
    fi
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# constraints.txt pins the versions the suite was run with: a fresh resolve of this many extras
# can backtrack for a long time (or into packages for Python 2), and CI must be reproducible
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[service,test]"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# two pytest workers (pytest-xdist), one test file each at a time: the suite waits on servers,
# browsers and containers as much as it computes, and module-scoped fixtures stay per file
exec .venv/bin/python -m pytest -n "${BSVM_TEST_WORKERS:-2}" --dist loadfile "$@"
