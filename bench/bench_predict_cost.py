"""Server CPU per request of ``POST /predict`` next to a bare FastAPI route, on one server.

One uvicorn process (``python -m bench.bench_predict_cost --serve``: the uvicorn options of
``python -m service``, so the same HTTP protocol, event loop and settings) serves the real app
and, at ``POST /bare``, a bare FastAPI app: one route taking the same JSON body through a
pydantic model and returning a list, with no middleware. The server is pinned to core 0 and
the client to core 1; the client is one keep-alive raw socket posting prebuilt requests, so it
costs the server nothing extra. Server CPU per request is the process's utime + stime
(``/proc/<pid>/stat``) over a run divided by its requests; each kind runs ``--rounds`` times,
interleaved, and the median is shown. Run::

    .venv/bin/python -m bench.bench_predict_cost [--requests 2000] [--rounds 3]

The model is a KernelSVM (rbf, C = 1) on scikit-learn's standardised breast-cancer data (30
features). Peak RSS is the server's ``VmHWM`` at the end. The same rows also go to
``/predict?model=<id>`` as Open Inference Protocol binary tensor data (raw float64 after the
JSON header; ``/v2/models/{id}/infer`` takes the same), from which no number is parsed as text.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

from bench.common import binary_tensor_body
from bench.server import start_server, stop_server

SERVER_CORE, CLIENT_CORE = 0, 1
MODEL_TYPE = "kernel_svm"
PARAMS = {"C": 1.0, "kernel": "rbf", "gamma": "scale"}
BARE_PATH = "/bare"
READ_PATH = "/read"
FLOOR_PATH = "/floor"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Any, Any], Awaitable[None]]


class BareBody(BaseModel):
    """The predict body's fields, as a plain FastAPI route would declare them."""

    model: str
    X: list[list[float]]


def bare_app() -> FastAPI:
    """A FastAPI app with one route: the JSON body in, one label per row out."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.post(BARE_PATH)
    async def bare(body: BareBody) -> list[int]:
        return [0] * len(body.X)

    return app


async def read_only(scope: Scope, receive: Any, send: Any) -> None:
    """An ASGI app that reads the whole body and answers ``[]``: the HTTP layer's own cost."""
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    headers = [(b"content-length", b"2"), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"[]"})


class ReadyAnswer:
    """An ASGI endpoint that reads the body and answers ``[0]``: no decoding, no model."""

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        await read_only(scope, receive, send)


STUB_SCORING = "BENCH_STUB_SCORING"
"""Set in the server's environment by ``--stub-scoring``."""


def _stub_scoring() -> None:
    """Every model's point outputs answered by a stub (one call: zeros) instead of the model:
    what a predict costs beside the model's own scoring (bench only; ``--stub-scoring``)."""
    from dataclasses import replace

    from service.inference import servable as servable_module

    made = servable_module.make_servable

    def stubbed(model_id: str, record: dict[str, Any], estimator: Any) -> Any:
        ready = made(model_id, record, estimator)
        return replace(ready, scorers={k: _zeros for k in ready.scorers})

    servable_module.make_servable = stubbed


def _zeros(X: np.ndarray) -> np.ndarray:
    return np.zeros(X.shape[0], dtype=np.int64)


def create_bench_app() -> ASGI:
    """The service's app, with ``POST /bare`` served by ``bare_app``, ``POST /read`` by
    ``read_only``, and ``POST /floor`` by a route of the service's own router answering ready
    bytes: the floor of any predict entered from routing (request-id, key, body cap and timer,
    metrics, access log middleware; FastAPI's error middleware; the router's match), bench only."""
    from starlette.routing import Route

    from service.api.app import create_app

    if os.environ.get(STUB_SCORING):
        _stub_scoring()
    real, bare = create_app(), bare_app()
    real.router.routes.insert(0, Route(FLOOR_PATH, ReadyAnswer(), methods=["POST"]))

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == BARE_PATH:
            await bare(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == READ_PATH:
            await read_only(scope, receive, send)
        else:
            await real(scope, receive, send)

    return app


def serve() -> None:
    """uvicorn with ``python -m service``'s options on ``create_bench_app``."""
    import uvicorn

    from service.__main__ import uvicorn_options
    from service.settings import Settings

    uvicorn.run("bench.bench_predict_cost:create_bench_app", **uvicorn_options(Settings()))


class Client:
    """One keep-alive HTTP/1.1 connection sending prebuilt requests."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host = host
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def request(self, method: str, path: str, body: Any = None) -> bytes:
        """Prebuilt bytes of one request with a JSON body."""
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        return head.encode() + data

    def binary_request(self, path: str, X: np.ndarray) -> bytes:
        """Prebuilt bytes of an Open Inference Protocol request with ``X`` as binary FP64 data,
        asking for labels only (as ``/predict`` answers by default)."""
        body, headers = binary_tensor_body(X, binary_labels=False)
        lines = "".join(f"{key}: {value}\r\n" for key, value in headers.items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n{lines}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    def send(self, raw: bytes) -> tuple[int, bytes]:
        """Send one request; (status, body) of its response."""
        self.sock.sendall(raw)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            rest += self._recv()
        self.buffer = rest[length:]
        return status, rest[:length]

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.sock.close()


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads, finished ones included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def minor_faults(pid: int) -> int:
    """Minor page faults of process ``pid`` so far (fresh pages it touched)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def idle_rate(pid: int, seconds: float = 2.0) -> float:
    """Server CPU seconds per second with no request (its job dispatcher's polling)."""
    before, started = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.perf_counter() - started)


def run(
    client: Client, pid: int, raw: bytes, n: int, idle: float = 0.0
) -> tuple[float, float, np.ndarray]:
    """``n`` requests: (server CPU seconds per request less idle CPU, its minor page faults per
    request, client latencies in s)."""
    latencies = np.empty(n)
    before, faults, t0 = cpu_seconds(pid), minor_faults(pid), time.perf_counter()
    for i in range(n):
        started = time.perf_counter()
        status, body = client.send(raw)
        latencies[i] = time.perf_counter() - started
        if status != 200:
            raise RuntimeError(f"status {status}: {body[:300]!r}")
    busy = cpu_seconds(pid) - before - idle * (time.perf_counter() - t0)
    return busy / n, (minor_faults(pid) - faults) / n, latencies


def train(client: Client, X: np.ndarray, y: np.ndarray) -> str:
    """Train the model through ``POST /train``; its id."""
    body = {"model_type": MODEL_TYPE, "params": PARAMS, "X": X.tolist(), "y": y.tolist()}
    status, answer = client.send(client.request("POST", "/train", body))
    if status not in (200, 201):
        raise RuntimeError(f"training failed with {status}: {answer[:300]!r}")
    return json.loads(answer)["model_id"]


def measure(url: str, pid: int, n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median CPU per request, p50/p99 of every kind over ``rounds`` interleaved runs."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    client = Client(url)
    try:
        model_id = train(client, X, y)
        kinds = {
            "bare, 1 row": ("/bare", {"model": model_id, "X": X[:1].tolist()}),
            "predict, 1 row": ("/predict", {"model": model_id, "X": X[:1].tolist()}),
            "bare, 100 rows": ("/bare", {"model": model_id, "X": X[:100].tolist()}),
            "predict, 100 rows": ("/predict", {"model": model_id, "X": X[:100].tolist()}),
            "read body only, 1 row": (READ_PATH, {"model": model_id, "X": X[:1].tolist()}),
            "service floor, 1 row": (FLOOR_PATH, {"model": model_id, "X": X[:1].tolist()}),
            "read body only, 100 rows": (READ_PATH, {"model": model_id, "X": X[:100].tolist()}),
        }
        raws = {kind: client.request("POST", path, body) for kind, (path, body) in kinds.items()}
        infer = f"/predict?model={model_id}"  # V2 bodies, binary ones too, on /predict
        for rows in (1, 100):
            kind = f"v2 binary, {rows} row{'s' if rows > 1 else ''}"
            raws[kind] = client.binary_request(infer, X[:rows])
            kinds[kind] = (infer, None)
        for raw in raws.values():
            run(client, pid, raw, max(n // 10, 50))  # warm: caches, the thread pool
        idle = idle_rate(pid)
        cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
        faults: dict[str, list[float]] = {kind: [] for kind in kinds}
        lat: dict[str, list[np.ndarray]] = {kind: [] for kind in kinds}
        for _ in range(rounds):
            for kind, raw in raws.items():
                per_request, faulted, latencies = run(client, pid, raw, n, idle)
                cpu[kind].append(per_request)
                faults[kind].append(faulted)
                lat[kind].append(latencies)
    finally:
        client.close()
    out: dict[str, Any] = {"idle": {"cpu_ms": idle * 1000}}
    for kind in kinds:
        ms = np.concatenate(lat[kind]) * 1000
        out[kind] = {
            "cpu_ms": statistics.median(cpu[kind]) * 1000,
            "cpu_min_ms": min(cpu[kind]) * 1000,
            "faults": statistics.median(faults[kind]),
            "cpu_runs": [round(c * 1000, 3) for c in cpu[kind]],
            "p50": float(np.percentile(ms, 50)),
            "p99": float(np.percentile(ms, 99)),
        }
    return out


def report(results: dict[str, dict[str, Any]], rss_mb: float, n: int, rounds: int) -> str:
    """The Markdown table and the acceptance ratios."""
    idle = results.pop("idle")["cpu_ms"]
    bare = results["bare, 1 row"]["cpu_ms"]
    lines = [
        f"{n} requests x {rounds} rounds per kind, one keep-alive client on core {CLIENT_CORE}, "
        f"server on core {SERVER_CORE}; server CPU = median (and least) over rounds, less the "
        f"idle server's {idle:.1f} ms/s (its job dispatcher)",
        "",
        "| request | server CPU ms | least ms | ratio to bare 1 row | p50 ms | p99 ms "
        "| page faults | CPU per round ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in results.items():
        lines.append(
            f"| {kind} | {r['cpu_ms']:.3f} | {r['cpu_min_ms']:.3f} | {r['cpu_ms'] / bare:.2f}x | "
            f"{r['p50']:.3f} | {r['p99']:.3f} | {r['faults']:.2f} | "
            f"{', '.join(map(str, r['cpu_runs']))} |"
        )
    lines.append("")
    for stat, key in (("median", "cpu_ms"), ("least", "cpu_min_ms")):
        bare, one, hundred = (
            results[k][key] for k in ("bare, 1 row", "predict, 1 row", "predict, 100 rows")
        )
        binary_one, binary_hundred = (
            results[k][key] for k in ("v2 binary, 1 row", "v2 binary, 100 rows")
        )
        lines.append(
            f"{stat}: predict 1 row / bare 1 row = {one / bare:.2f} (target <= 1.3); "
            f"predict 1 row = {one:.3f} ms (target <= 0.35); "
            f"predict 100 rows / predict 1 row = {hundred / one:.2f} (target <= 2); "
            f"binary tensors: 100 rows / 1 row = {binary_hundred / binary_one:.2f}, "
            f"100 rows / JSON predict 1 row = {binary_hundred / one:.2f}"
        )
        floor = results["service floor, 1 row"][key]
        lines.append(
            f"{stat}: service floor / bare 1 row = {floor / bare:.2f} (the service's middleware "
            f"and router answering ready bytes); predict 1 row <= 0.9 x bare leaves "
            f"{(0.9 * bare - floor) * 1000:.0f} us above the floor for decoding, the model's "
            f"scoring and encoding (predict uses {(one - floor) * 1000:.0f} us)"
        )
    lines.append(f"server peak RSS (VmHWM): {rss_mb:.0f} MiB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Start the server on core 0, measure from core 1, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per kind per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--log-level",
        default="warning",
        help="the server's BSVM_LOG_LEVEL (the service's default is info: one access line each)",
    )
    parser.add_argument(
        "--stub-scoring",
        action="store_true",
        help="answer every model output with a stub (zeros): the cost of a predict beside the "
        "model's own scoring",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    if args.stub_scoring:
        os.environ[STUB_SCORING] = "1"
    os.sched_setaffinity(0, {CLIENT_CORE})
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(
            Path(tmp),
            core=SERVER_CORE,
            module=["bench.bench_predict_cost", "--serve"],
            log_level=args.log_level,
        )
        try:
            results = measure(url, process.pid, args.requests, args.rounds)
            rss_mb = peak_rss_mb(process.pid)
        finally:
            stop_server(process)
    stub = "; model scoring stubbed (zeros)" if args.stub_scoring else ""
    print(f"server log level: {args.log_level}; load average: {os.getloadavg()}{stub}")
    print(report(results, rss_mb, args.requests, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
