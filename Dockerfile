# bsvm model server: FastAPI app under uvicorn, models on the /data/models volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BSVM_MODEL_DIR=/data/models \
    MPLCONFIGDIR=/tmp/matplotlib

WORKDIR /app

# Dependencies come from pyproject.toml (the package and its "service" extra).
COPY pyproject.toml README.md ./
COPY bsvm_core ./bsvm_core
COPY service ./service
RUN pip install --no-cache-dir "./[service]" \
    && groupadd --system --gid 10001 bsvm \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin bsvm \
    && mkdir -p /data/models \
    && chown 10001:10001 /data/models

USER 10001:10001
VOLUME ["/data/models"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health/live', timeout=4)"]

# uvicorn's own flags set the address (BSVM_HOST and BSVM_PORT are read by `python -m service` only).
CMD ["uvicorn", "service.api.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000", "--no-access-log"]
