# bsvm model server: FastAPI app under uvicorn; registry.db and models/ on the /data volume.
# The same image runs the dask scheduler and workers of compose.yaml (EXTRAS includes dask).
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

WORKDIR /app

# Dependencies come from pyproject.toml (the package and its extras).
COPY pyproject.toml README.md ./
COPY bsvm_core ./bsvm_core
COPY service ./service
RUN pip install --no-cache-dir "./[${EXTRAS}]" \
    && groupadd --system --gid 10001 bsvm \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin bsvm \
    && mkdir -p /data/models \
    && chown -R 10001:10001 /data

USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

# Readiness on the port the server really listens on (BSVM_PORT may be overridden at run time).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/ready' % os.environ.get('BSVM_PORT', '8000'), timeout=4)"]

# python -m service reads every BSVM_* setting (BSVM_HOST, BSVM_PORT, BSVM_WORKERS, ...).
CMD ["python", "-m", "service"]
