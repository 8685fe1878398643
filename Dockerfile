# bsvm model server: FastAPI app under uvicorn; registry.db and models/ on the /data volume.
# The same image runs the dask scheduler and workers of compose.yaml (EXTRAS includes dask).

# Stage 1: the package as a wheel. The source tree stays in this stage; the image gets the wheel.
FROM python:3.11-slim AS wheel
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bsvm_core ./bsvm_core
COPY service ./service
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# Stage 2: the server.
FROM python:3.11-slim

# Extras of pyproject.toml to install: "service" alone for one server on its own disk;
# "service,s3,dask,postgres" for the scaled set-up of compose.yaml.
ARG EXTRAS=service

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BSVM_HOST=0.0.0.0 \
    BSVM_PORT=8000 \
    BSVM_DATA_DIR=/data \
    MPLCONFIGDIR=/tmp/matplotlib

# The dependencies first, in their own layer: pyproject.toml's requirements for EXTRAS at the
# versions of constraints.txt (the ones CI tested), so a change of the source reuses this layer.
COPY pyproject.toml constraints.txt /tmp/deps/
RUN python -c "import sys, tomllib; p = tomllib.load(open(sys.argv[1], 'rb'))['project']; print('\n'.join(p['dependencies'] + [d for e in sys.argv[2].split(',') for d in p['optional-dependencies'][e]]))" /tmp/deps/pyproject.toml "${EXTRAS}" > /tmp/deps/requirements.txt \
    && pip install --no-cache-dir -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
    && rm -rf /tmp/deps \
    && groupadd --system --gid 10001 bsvm \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/bsvm --create-home --shell /usr/sbin/nologin bsvm \
    && mkdir -p /data/models \
    && chown -R 10001:10001 /data

# Then the package itself, installed from its wheel (no dependency resolved here); pip check
# fails the build when the wheel's requirements and the installed dependencies disagree.
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-cache-dir --no-deps /tmp/wheels/bsvm-*.whl \
    && rm -rf /tmp/wheels \
    && pip check

# Not the source tree: python -m service imports the installed package.
WORKDIR /home/bsvm
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

# Readiness on the port the server really listens on (BSVM_PORT may be overridden at run time).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/ready' % os.environ.get('BSVM_PORT', '8000'), timeout=4)"]

# python -m service reads every BSVM_* setting (BSVM_HOST, BSVM_PORT, BSVM_WORKERS, ...).
CMD ["python", "-m", "service"]
