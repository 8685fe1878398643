"""Train and predict through the service on each back end: SQLite or PostgreSQL, file or S3.

Starts what it needs itself (a PostgreSQL cluster with initdb/pg_ctl, a moto S3 server on
loopback), then for each of the four pairs times ``POST /train`` (LDA on iris, synchronous: queue,
worker process, artifact, row) and ``POST /predict`` (one row, model by name so every request
resolves a reference) through an in-process client, and prints one Markdown table with the
medians, their ratio to the SQLite + file pair and the peak RSS of the process::

    .venv/bin/python -m bench.bench_backends [--trains 15] [--predicts 300]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from fastapi.testclient import TestClient
from sklearn.datasets import load_iris

from service.api.app import create_app
from service.settings import Settings
from tests.service.postgres_server import fresh_database, postgres_server

BUCKET = "bsvm-bench"


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def s3_server() -> tuple[object, str]:
    """A moto S3 server on loopback with one bucket; (server, endpoint)."""
    import boto3
    from moto.server import ThreadedMotoServer

    for key, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }.items():
        os.environ[key] = value
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    return server, endpoint


def measure(settings: Settings, trains: int, predicts: int) -> tuple[float, float]:
    """Median seconds of one synchronous train and of one single-row predict."""
    X, y = load_iris(return_X_y=True)
    body = {"model_type": "lda", "name": "bench", "X": X.tolist(), "y": y.tolist()}
    row = {"model": "bench", "X": X[:1].tolist()}
    with TestClient(create_app(settings)) as client:
        client.post("/train", json=body)  # the worker's forkserver is warm from here on
        train_s = []
        for _ in range(trains):
            start = time.perf_counter()
            assert client.post("/train", json=body).status_code == 201
            train_s.append(time.perf_counter() - start)
        client.post("/predict", json=row)
        predict_s = []
        for _ in range(predicts):
            start = time.perf_counter()
            assert client.post("/predict", json=row).status_code == 200
            predict_s.append(time.perf_counter() - start)
    return statistics.median(train_s), statistics.median(predict_s)


def main() -> None:
    """Run the four pairs and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trains", type=int, default=15)
    parser.add_argument("--predicts", type=int, default=300)
    args = parser.parse_args()
    server, endpoint = s3_server()
    rows = []
    try:
        with postgres_server() as admin, tempfile.TemporaryDirectory() as tmp:
            for database in ("sqlite", "postgresql"):
                for artifacts in ("file", "s3"):
                    data_dir = Path(tmp) / f"{database}-{artifacts}"
                    settings = Settings(
                        data_dir=data_dir,
                        database_url=None if database == "sqlite" else fresh_database(admin),
                        artifact_url=None
                        if artifacts == "file"
                        else f"s3://{BUCKET}/{uuid.uuid4().hex}",
                        s3_endpoint_url=None if artifacts == "file" else endpoint,
                        log_level="warning",
                    )
                    train, predict = measure(settings, args.trains, args.predicts)
                    rows.append((database, artifacts, train, predict, peak_rss_mb()))
    finally:
        server.stop()
    base_train, base_predict = rows[0][2], rows[0][3]
    print(
        "| registry | artifacts | train median (s) | ratio | predict median (ms) | ratio | peak RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|")
    for database, artifacts, train, predict, rss in rows:
        print(
            f"| {database} | {artifacts} | {train:.3f} | {train / base_train:.2f}x | "
            f"{predict * 1000:.2f} | {predict / base_predict:.2f}x | {rss:.0f} |"
        )


if __name__ == "__main__":
    main()
