"""Load test of single-row ``POST /predict``: p50/p99 latency and requests per second.

One uvicorn worker (``python -m service``) on a free loopback port with a temporary model dir;
a KernelSVM (rbf, C = 1) trained on scikit-learn's standardised breast-cancer data; then
``--clients`` asyncio httpx clients, each posting one row at a time for ``--seconds``. Run::

    .venv/bin/python -m bench.load_predict --clients 32 --seconds 20

The clients share the machine with the server, so on few cores the numbers are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from bench.server import start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
MODEL_TYPE = "kernel_svm"
PARAMS = {"C": 1.0, "kernel": "rbf", "gamma": "scale"}


def train(url: str) -> tuple[str, np.ndarray]:
    """Train the model; (model id, rows to score)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    body = {"model_type": MODEL_TYPE, "params": PARAMS, "X": X.tolist(), "y": y.tolist()}
    response = httpx.post(f"{url}/train", json=body, timeout=300)
    response.raise_for_status()
    return response.json()["model_id"], X


async def client(url: str, model_id: str, rows: np.ndarray, stop: float, out: list[float]) -> int:
    """Post single rows until ``stop``; append each latency; return the error count."""
    errors = 0
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        i = 0
        while time.perf_counter() < stop:
            body = {"model": model_id, "X": [rows[i % len(rows)].tolist()]}
            started = time.perf_counter()
            response = await http.post("/predict", json=body)
            out.append(time.perf_counter() - started)
            errors += response.status_code != 200
            i += 1
    return errors


async def load(url: str, model_id: str, rows: np.ndarray, clients: int, seconds: float):
    """Run ``clients`` concurrent clients for ``seconds``."""
    latencies: list[float] = []
    started = time.perf_counter()
    stop = started + seconds
    errors = await asyncio.gather(
        *(client(url, model_id, rows[k::clients], stop, latencies) for k in range(clients))
    )
    return latencies, time.perf_counter() - started, sum(errors)


def main(argv: list[str] | None = None) -> int:
    """Start a server, train, load it, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp))
        try:
            model_id, X = train(url)
            httpx.post(f"{url}/predict", json={"model": model_id, "X": X[:1].tolist()})  # warm
            latencies, wall, errors = asyncio.run(
                load(url, model_id, X, args.clients, args.seconds)
            )
        finally:
            stop_server(process)
    ms = np.asarray(latencies) * 1000
    print(
        f"model_type={MODEL_TYPE}, clients={args.clients}, seconds={args.seconds:g}, httpx+asyncio"
    )
    print("| requests | errors | req/s | p50 ms | p90 ms | p99 ms | mean ms |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {len(ms)} | {errors} | {len(ms) / wall:.1f} | {np.percentile(ms, 50):.1f} | "
        f"{np.percentile(ms, 90):.1f} | {np.percentile(ms, 99):.1f} | {statistics.fmean(ms):.1f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
