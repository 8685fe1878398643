"""Load test of single-row ``POST /predict``: p50/p99 latency and requests per second.

One uvicorn worker (``python -m service``) on a free loopback port with a temporary model dir;
a KernelSVM (rbf, C = 1) trained on scikit-learn's standardised breast-cancer data; then
``--clients`` asyncio httpx clients, each posting one row at a time for ``--seconds``. Run::

    .venv/bin/python bench/load_predict.py --clients 32 --seconds 20

The clients share the machine with the server, so on few cores the numbers are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

ROOT = Path(__file__).resolve().parent.parent
MODEL_TYPE = "kernel_svm"
PARAMS = {"C": 1.0, "kernel": "rbf", "gamma": "scale"}


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model_dir: Path, port: int) -> subprocess.Popen:
    """``python -m service`` on ``port``, logs discarded; returns once ready."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BSVM_")}
    env.update(
        BSVM_MODEL_DIR=str(model_dir),
        BSVM_PORT=str(port),
        BSVM_HOST="127.0.0.1",
        BSVM_LOG_LEVEL="warning",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "service"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/ready").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not become ready")


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
        port = free_port()
        process = start_server(Path(tmp), port)
        try:
            url = f"http://127.0.0.1:{port}"
            model_id, X = train(url)
            httpx.post(f"{url}/predict", json={"model": model_id, "X": X[:1].tolist()})  # warm
            latencies, wall, errors = asyncio.run(
                load(url, model_id, X, args.clients, args.seconds)
            )
        finally:
            process.terminate()
            process.wait(timeout=15)
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
