"""In-process cost of one ``POST /predict`` through the whole ASGI app, next to a bare FastAPI route.

No sockets and no uvicorn: each request is one call of the app with a prebuilt scope and body, so
what is measured is the service's own Python path (middleware, router, route, decode, score,
encode) against ``bench_predict_cost``'s bare route. CPU time per request, the least of
``--rounds`` rounds (the machine's other load only ever adds). Run::

    .venv/bin/python -m bench.bench_asgi_predict [--requests 3000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sklearn.datasets import load_breast_cancer

from bench.bench_predict_cost import bare_app
from service.api.app import create_app
from service.settings import Settings

Scope = dict[str, Any]


def scope_of(path: str, body: bytes) -> Scope:
    """An HTTP scope of ``POST path`` with a JSON body of ``len(body)`` bytes."""
    headers = [
        (b"host", b"bench"),
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
    ]
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "scheme": "http",
        "root_path": "",
    }


async def call(app: Any, scope: Scope, body: bytes) -> list[dict[str, Any]]:
    """One request: the messages the app sent."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    out: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        out.append(message)

    await app(dict(scope), receive, send)
    return out


async def cpu_us(app: Any, scope: Scope, body: bytes, n: int) -> float:
    """CPU µs per request over ``n`` requests, after a warm-up."""
    for _ in range(200):
        out = await call(app, scope, body)
    assert out[0]["status"] == 200, out
    start = time.process_time()
    for _ in range(n):
        await call(app, scope, body)
    return (time.process_time() - start) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(data_dir=tmp, log_level="warning"))
        with TestClient(app) as client:
            body = {"model_type": "kernel_svm", "X": X.tolist(), "y": y.tolist(), "name": "bc"}
            model_id = client.post("/train", json=body).json()["model_id"]
            one = json.dumps({"model": model_id, "X": X[:1].tolist()}).encode()
            hundred = json.dumps({"model": model_id, "X": X[:100].tolist()}).encode()
            kinds = [
                ("bare, 1 row", bare_app(), scope_of("/bare", one), one),
                ("predict, 1 row", app, scope_of("/predict", one), one),
                ("predict, 100 rows", app, scope_of("/predict", hundred), hundred),
            ]
            found: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                for name, target, scope, raw in kinds:
                    cost = asyncio.run(cpu_us(target, scope, raw, args.requests))
                    found.setdefault(name, []).append(cost)
    bare = min(found["bare, 1 row"])
    print("| request | least CPU µs | rounds µs | ratio to bare |")
    print("|---|---|---|---|")
    for name, costs in found.items():
        rounds = ", ".join(f"{c:.1f}" for c in costs)
        print(f"| {name} | {min(costs):.1f} | {rounds} | {min(costs) / bare:.2f}x |")
    print(f"peak RSS {np.round(_peak_rss_mib(), 1)} MiB")
    return 0


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    raise SystemExit(main())
