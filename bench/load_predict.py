"""Load test of single-row ``POST /predict``: req/s, p50 and p99 at 1, 8, 32 and 64 clients.

The server is ``python -m service`` (``bench.server``) on a temporary data dir, with a KernelSVM
(rbf, C = 1, gamma = scale) trained on scikit-learn's standardised breast-cancer data; each
request scores one of 64 rows (``{"model": id, "X": [[30 floats]]}``). The load comes from
``bench.load_generator``: a separate process, raw asyncio streams, pre-encoded keep-alive
requests, one request in flight per client. Per run it gives requests/s, p50/p99 latency,
non-200 answers, the server's CPU ms per request (user+system of its processes over the run),
the generator's CPU use, and the server's peak RSS (``VmHWM`` of each serving process, reset
before every run).

Cores. The machine has two. Tables:

* ``ceiling`` — the generator (core 1) against a fixed-answer asyncio server (core 0): what the
  generator itself can drive; it must be well above the server's rate.
* ``split`` — server pinned to core 0, generator to core 1: the single-worker figures.
* ``shared`` — workers = 1 and workers = 2 with the server *and* the generator allowed on both
  cores. Two workers need both cores, so there is no third core for the generator: both runs
  share the same two cores with it, and the ratio 2 workers / 1 worker is taken between them.
  The generator's CPU is in the table, so what it took from the server is visible; with a
  generator costing ``g`` and the server ``s`` CPU per request, two workers can at best reach
  ``2 / (s + g)`` requests per second, one worker ``1 / s``, so the ratio here is bounded by
  ``2 s / (s + g)`` and understates what two workers do on a machine with a spare core.
  ``--pipeline N`` (shared only) has each client write N requests at once and read their
  answers in order (HTTP/1.1 pipelining). Measured at N = 8 (``bench/results.md``) it cut ``g``
  only from about 57 to 48 µs, since each answer is still parsed in Python, and uvicorn holds a
  connection's next request until its answer is sent. Latencies then run from the write of the
  N requests to each answer.
* ``workers`` — the ``shared`` comparison done side by side: a server per ``--workers`` count,
  all started at once on both cores, their runs interleaved ``--rounds`` times per client count,
  then one line per client count with the best and the median rate against one worker. Use it
  with ``--generator wrk``: measured beside the server, wrk costs 25-36 µs per request (``g``
  above, loopback kernel work included; 10 µs against the fixed-answer server) where the Python
  generator costs 50–60, so the bound ``2 s / (s + g)`` rises from about 1.7 to about 1.78.
* ``batching`` — adaptive micro-batching (``BSVM_PREDICT_BATCHING``) off and on, two servers
  side by side on core 0 (generator on core 1), their runs interleaved ``--rounds`` times so
  that a change in the machine's other load hits both.

``--generator wrk`` (``bench.wrk_generator``) drives the load with wrk instead of the Python
generator, for every table but ``--pipeline``.

``--set KEY=VALUE`` passes a ``BSVM_KEY`` setting to the server (e.g.
``--set predict_batch_wait_us=200``); each run prints the settings it used. With the default
``BSVM_PREDICT_CONCURRENCY`` (8), more than 8 one-row predicts in flight get 503 (the non-200
column); the figures in ``bench/results.md`` use ``--set predict_concurrency=64``. Run::

    .venv/bin/python -m bench.load_predict --set predict_concurrency=64   # ceiling, split, shared
    .venv/bin/python -m bench.load_predict --tables batching --clients 32 64 --rounds 3 \
        --set predict_concurrency=64
    .venv/bin/python -m bench.load_predict --generator wrk --tables workers --clients 8 32 64 \
        --rounds 3 --set predict_concurrency=64

Absolute figures move with other load on the machine (``uptime`` is printed); compare the rows of
one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from bench import wrk_generator
from bench.load_generator import encode_get, encode_post
from bench.server import (
    cpu_seconds,
    peak_rss_mb,
    process_tree,
    reset_peak_rss,
    start_server,
    stop_server,
)
from tests.service.live_server import free_port

ROOT = Path(__file__).resolve().parent.parent
MODEL_TYPE = "kernel_svm"
PARAMS = {"C": 1.0, "kernel": "rbf", "gamma": "scale"}
N_BODIES = 64
SERVER, GENERATOR, BOTH = {0}, {1}, {0, 1}
GENERATOR_KIND = {"wrk": False}
"""Which load generator ``generate`` runs; set once by ``main`` from ``--generator``."""
HEAD = (
    "| table | workers | clients | req/s | p50 ms | p99 ms | non-200 | server CPU ms/req "
    "| generator CPU | server peak RSS MB |"
)


def train(url: str) -> tuple[str, np.ndarray]:
    """Train the model; (model id, the standardised rows)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    body = {"model_type": MODEL_TYPE, "params": PARAMS, "X": X.tolist(), "y": y.tolist()}
    response = httpx.post(f"{url}/train", json=body, timeout=300)
    response.raise_for_status()
    return response.json()["model_id"], X


def predict_requests(port: int, model_id: str, X: np.ndarray) -> list[bytes]:
    """``N_BODIES`` single-row predicts, encoded."""
    return [
        encode_post(
            "127.0.0.1",
            port,
            "/predict",
            json.dumps({"model": model_id, "X": [row.tolist()]}).encode(),
            "application/json",
        )
        for row in X[:N_BODIES]
    ]


def generate(
    port: int, requests: list[bytes], clients: int, seconds: float, cores: set[int], depth: int = 1
) -> dict:
    """Run the load generator pinned to ``cores`` (``depth`` requests in flight per client);
    its summary. The generator is ``bench.load_generator`` or, with ``GENERATOR_KIND["wrk"]``
    set by ``--generator wrk``, ``bench.wrk_generator`` (no pipelining there)."""
    if GENERATOR_KIND["wrk"]:
        if depth != 1:
            raise ValueError("--pipeline needs the Python generator")
        return wrk_generator.run(port, requests, clients, seconds, cores)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump([r.decode("latin-1") for r in requests], fh)
    command = [sys.executable, "-m", "bench.load_generator", "--port", str(port)]
    command += ["--requests", fh.name, "--clients", str(clients), "--seconds", str(seconds)]
    command += ["--pipeline", str(depth)]
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            capture_output=True,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
        )
    finally:
        os.unlink(fh.name)
    if done.returncode:
        raise RuntimeError(f"load generator failed:\n{done.stderr}")
    return json.loads(done.stdout)


def serving(pid: int) -> list[int]:
    """The server's processes that serve HTTP: the root, or uvicorn's workers when it has them."""
    pids = process_tree(pid)
    cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in pids}
    workers = [p for p in pids[1:] if b"spawn_main" in cmdlines[p]]
    return workers or [pid]


def measured(
    table: str,
    workers: int,
    pid: int,
    port: int,
    requests: list[bytes],
    clients: int,
    seconds: float,
    cores: set[int],
    depth: int = 1,
) -> str:
    """One run against a started server, as a Markdown row."""
    processes = serving(pid)
    for p in processes:
        reset_peak_rss(p)
    cpu = sum(cpu_seconds(p) for p in process_tree(pid))
    result = generate(port, requests, clients, seconds, cores, depth)
    cpu = sum(cpu_seconds(p) for p in process_tree(pid)) - cpu
    # the warm-up's requests cost server CPU too
    total = result.get("served", result["rate"] * (result["seconds"] + 0.5))
    rss = "+".join(f"{peak_rss_mb(p):.0f}" for p in processes)
    return (
        f"| {table} | {workers} | {clients} | {result['rate']:.0f} | {result['p50_ms']:.2f} | "
        f"{result['p99_ms']:.2f} | {result['errors']} | {1000 * cpu / max(total, 1):.3f} | "
        f"{100 * result['generator_cpu']:.0f}% | {rss} |"
    )


def wait_listening(port: int, timeout: float = 10.0) -> None:
    """Return once something accepts connections on ``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def ceiling(clients: list[int], seconds: float) -> list[str]:
    """The generator (core 1) against a fixed-answer server (core 0)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.load_generator", "--trivial", "--port", str(port)],
        cwd=ROOT,
        preexec_fn=lambda: os.sched_setaffinity(0, SERVER),
    )
    try:
        wait_listening(port)
        requests = [encode_get("127.0.0.1", port, "/")]
        return [
            measured("ceiling", 0, server.pid, port, requests, n, seconds, GENERATOR)
            for n in clients
        ]
    finally:
        server.terminate()
        server.wait(timeout=10)


def served(
    table: str,
    workers: int,
    clients: list[int],
    seconds: float,
    settings: dict[str, str],
    live: bool,
    depth: int = 1,
) -> list[str]:
    """Start a server for ``table`` (split or shared), train, run every client count."""
    server_cores, generator_cores = (SERVER, GENERATOR) if table == "split" else (BOTH, BOTH)
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp), core=server_cores, workers=str(workers), **settings)
        try:
            port = int(url.rsplit(":", 1)[1])
            model_id, X = train(url)
            rows = []
            if live:
                health = [encode_get("127.0.0.1", port, "/health/live")]
                for n in clients:
                    row = measured(
                        table, workers, process.pid, port, health, n, seconds, generator_cores
                    )
                    rows.append(row.replace(f"| {table} |", f"| {table} GET /health/live |"))
            requests = predict_requests(port, model_id, X)
            label = table if depth == 1 else f"{table}, pipeline {depth}"
            for n in clients:
                row = measured(
                    table, workers, process.pid, port, requests, n, seconds, generator_cores, depth
                )
                rows.append(row.replace(f"| {table} |", f"| {label} |", 1))
            return rows
        finally:
            stop_server(process)


def batching(
    clients: list[int], seconds: float, settings: dict[str, str], wait_us: int, rounds: int
) -> list[str]:
    """Micro-batching off and on: two servers on core 0, runs interleaved ``rounds`` times."""
    variants = {
        "batching off": {"predict_batching": "false"},
        f"batching on, wait {wait_us} us": {
            "predict_batching": "true",
            "predict_batch_wait_us": str(wait_us),
        },
    }
    with contextlib.ExitStack() as stack:
        servers = {}
        for name, extra in variants.items():
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            process, url = start_server(tmp, core=SERVER, **{**settings, **extra})
            stack.callback(stop_server, process)
            port = int(url.rsplit(":", 1)[1])
            model_id, X = train(url)
            servers[name] = (process.pid, port, predict_requests(port, model_id, X))
        rows = []
        for n in clients:
            for _ in range(rounds):
                for name, (pid, port, requests) in servers.items():
                    rows.append(measured(name, 1, pid, port, requests, n, seconds, GENERATOR))
        return rows


def workers_ab(
    clients: list[int],
    seconds: float,
    settings: dict[str, str],
    rounds: int,
    worker_counts: list[int],
) -> list[str]:
    """One server per worker count, all on both cores with the generator; their runs interleaved
    ``rounds`` times per client count (a change in the machine's other load hits every server),
    then a line per client count with each count's best and median rate against the first's."""
    with contextlib.ExitStack() as stack:
        servers = {}
        for workers in worker_counts:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            process, url = start_server(tmp, core=BOTH, workers=str(workers), **settings)
            stack.callback(stop_server, process)
            port = int(url.rsplit(":", 1)[1])
            model_id, X = train(url)
            servers[workers] = (process.pid, port, predict_requests(port, model_id, X))
        rows, ratios = [], []
        for n in clients:
            rates: dict[int, list[float]] = {w: [] for w in servers}
            for _ in range(rounds):
                for workers, (pid, port, requests) in servers.items():
                    row = measured("workers", workers, pid, port, requests, n, seconds, BOTH)
                    rows.append(row)
                    rates[workers].append(float(row.split("|")[4]))
            base = worker_counts[0]
            for workers in worker_counts[1:]:
                best = max(rates[workers]) / max(rates[base])
                median = float(np.median(rates[workers]) / np.median(rates[base]))
                ratios.append(
                    f"| workers {workers} / {base}, {n} clients | best {best:.2f}x | "
                    f"median {median:.2f}x | rounds {rounds} |"
                )
        return rows + ratios


def main(argv: list[str] | None = None) -> int:
    """Run the chosen tables; print one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--tables",
        nargs="+",
        default=["ceiling", "split", "shared"],
        choices=["ceiling", "split", "shared", "batching", "workers"],
    )
    parser.add_argument("--batch-wait-us", type=int, default=500, help="for batching")
    parser.add_argument(
        "--rounds", type=int, default=2, help="for batching and workers: A/B repeats"
    )
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="for shared and workers"
    )
    parser.add_argument(
        "--pipeline",
        type=int,
        nargs="+",
        default=[1],
        help="for shared: requests in flight per client (HTTP/1.1 pipelining), one run each",
    )
    parser.add_argument(
        "--generator",
        choices=["python", "wrk"],
        default="python",
        help="bench.load_generator (default) or wrk (C; needs the wrk binary, e.g. apt-get "
        "install wrk): 25-36 µs per request beside the server instead of 50-60, which matters "
        "where it shares cores",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--live", action="store_true", help="also GET /health/live")
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    if args.generator == "wrk" and not wrk_generator.available():
        parser.error("--generator wrk: no wrk on PATH (Debian: apt-get install wrk)")
    GENERATOR_KIND["wrk"] = args.generator == "wrk"
    print(
        f"uptime: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min load average); "
        f"settings {settings or 'default'}; {args.seconds:g} s per run; "
        f"generator {args.generator}"
    )
    print(HEAD)
    print("|---" * (HEAD.count("|") - 1) + "|")
    for table in args.tables:
        if table == "ceiling":
            rows = ceiling(args.clients, args.seconds)
        elif table == "batching":
            rows = batching(args.clients, args.seconds, settings, args.batch_wait_us, args.rounds)
        elif table == "workers":
            rows = workers_ab(args.clients, args.seconds, settings, args.rounds, args.workers)
        elif table == "split":
            rows = served("split", 1, args.clients, args.seconds, settings, args.live)
        else:
            rows = [
                row
                for depth in args.pipeline
                for workers in args.workers
                for row in served(
                    "shared", workers, args.clients, args.seconds, settings, False, depth
                )
            ]
        for row in rows:
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
