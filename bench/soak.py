"""Soak test: a real server under a mixed load for a while; no 5xx, latency per kind, RSS over time.

Starts ``python -m service`` on a free loopback port with its own temporary data dir (pinned to
core 0, with the training workers it spawns), then ``--clients`` asyncio httpx clients (pinned to
core 1) for ``--seconds``, each drawing its next request from the mix: ~5% trainings (LDA, kernel
SVM or EM SVM on iris, a third of them in the background), ~85% predictions (1 to 100 rows,
by model id or by name), ~10% reads (``GET /jobs/{id}`` of a background training, or
``GET /models``). The server's RSS is sampled every second. Bounded by ``--seconds`` and
``--max-requests``; stops the server itself. Run::

    .venv/bin/python -m bench.soak --seconds 60 --clients 50

``--model-cache-mb 64`` is the small-cache mode: the server's ``BSVM_MODEL_CACHE_MB`` is set to
it, a third of the trainings are bulky MCMC SVMs (about 3.5 MiB each, ``BULKY``), and predicts also
ask for the models trained during the soak, so the cache fills past its cap and keeps evicting
and loading again. The cache's bytes (``bsvm_models_cached_bytes``) are sampled with the RSS; the
report says their peak against the cap.

Exits 1 when any answer was a 5xx or a transport error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import psutil
from sklearn.datasets import load_iris

from bench.server import start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
SERVER_CORE, LOAD_CORE = 0, 1
TRAIN_TYPES = {
    "lda": {},
    "kernel_svm": {"C": 1.0, "kernel": "rbf"},
    "em_svm": {"nu": 1.0, "alpha": 1.0},
}
BULKY = {"n_draws": 4000, "burn_in": 50, "n_chains": 4}
"""An MCMC SVM on iris keeping 16,000 draws per one-vs-rest problem: an artifact of about 3.5 MiB."""
REQUEST_TIMEOUT_S = 120.0
CACHED_BYTES = "bsvm_models_cached_bytes"


@dataclass
class Tally:
    """What the clients saw: latencies and statuses per kind, background job ids."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    jobs: list[str] = field(default_factory=list)
    trained: list[str] = field(default_factory=list)
    """Model ids trained during the soak (small-cache mode: predicts ask for them too)."""
    total: int = 0


def pin(cores: set[int]) -> bool:
    """Pin the calling process to ``cores`` when the machine has them; False when it cannot."""
    if not hasattr(os, "sched_setaffinity") or not cores <= os.sched_getaffinity(0):
        return False
    os.sched_setaffinity(0, cores)
    return True


def rss_mb(pid: int) -> tuple[float, float]:
    """RSS of the server process, and of it plus its children (training workers), in MiB."""
    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    children = 0
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            children += child.memory_info().rss
    return own / 2**20, (own + children) / 2**20


def train_request(
    rng: random.Random, X: np.ndarray, y: np.ndarray, bulky: bool = False
) -> tuple[str, dict]:
    """A training of a random type on iris (or a binary subset for EM), a third in background;
    with ``bulky`` a third are MCMC SVMs of about 3.5 MiB."""
    if bulky and rng.random() < 1 / 3:
        model_type, params = "mcmc_svm", {**BULKY, "random_state": rng.randrange(2**31)}
    else:
        model_type = rng.choice(sorted(TRAIN_TYPES))
        params = TRAIN_TYPES[model_type]
    Xt, yt = (X[:100], y[:100]) if model_type == "em_svm" else (X, y)
    body = {
        "model_type": model_type,
        "name": f"soak-{model_type}",
        "params": params,
        "X": Xt.tolist(),
        "y": yt.tolist(),
        "background": rng.random() < 1 / 3,
    }
    return ("train_bg" if body["background"] else "train"), body


async def one_request(
    client: httpx.AsyncClient,
    rng: random.Random,
    tally: Tally,
    models: list[str],
    X: np.ndarray,
    y: np.ndarray,
    bulky: bool = False,
) -> None:
    """Draw one request from the mix, send it, record kind, status and latency."""
    draw = rng.random()
    if draw < 0.05:
        kind, body = train_request(rng, X, y, bulky)
        call = client.post("/train", json=body)
    elif draw < 0.90:
        kind = "predict"
        rows = rng.randint(1, 100)
        start = rng.randrange(0, len(X) - rows + 1)
        model = rng.choice(tally.trained if bulky and tally.trained and draw < 0.5 else models)
        body = {"model": model, "X": X[start : start + rows].tolist()}
        call = client.post("/predict", json=body)
    elif draw < 0.95 and tally.jobs:
        kind = "job_poll"
        call = client.get(f"/jobs/{rng.choice(tally.jobs)}")
    else:
        kind = "list_models"
        call = client.get("/models", params={"limit": 20})
    started = time.perf_counter()
    try:
        response = await call
        status = str(response.status_code)
        if kind == "train_bg" and response.status_code == 202:
            tally.jobs.append(response.json()["job_id"])
        elif kind == "train" and response.status_code == 201:
            tally.trained.append(response.json()["model_id"])
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    tally.latencies[kind].append(time.perf_counter() - started)
    tally.statuses[kind][status] += 1
    tally.total += 1


async def client_loop(
    base_url: str,
    seed: int,
    deadline: float,
    max_requests: int,
    tally: Tally,
    models: list[str],
    X: np.ndarray,
    y: np.ndarray,
    bulky: bool = False,
) -> None:
    """One client: requests back to back until the deadline or the request budget."""
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
        while time.monotonic() < deadline and tally.total < max_requests:
            await one_request(client, rng, tally, models, X, y, bulky)


async def cached_mb(client: httpx.AsyncClient) -> float:
    """The server's ``bsvm_models_cached_bytes`` in MiB (NaN when it cannot be read)."""
    with contextlib.suppress(httpx.HTTPError):
        for line in (await client.get("/metrics")).text.splitlines():
            if line.startswith(CACHED_BYTES + " "):
                return float(line.split()[1]) / 2**20
    return float("nan")


async def sample_rss(
    pid: int, stop: asyncio.Event, samples: list[tuple[float, float, float, float]], base_url: str
):
    """(seconds since start, server RSS, server + children RSS, model cache MiB) every second
    until ``stop``."""
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
        while not stop.is_set():
            own, total = rss_mb(pid)
            samples.append((time.monotonic() - started, own, total, await cached_mb(client)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def run_load(args: argparse.Namespace, base_url: str, pid: int, models: list[str]):
    """All clients plus the RSS sampler; returns the tally and the RSS samples."""
    X, y = load_iris(return_X_y=True)
    tally, samples, stop = Tally(), [], asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pid, stop, samples, base_url))
    deadline = time.monotonic() + args.seconds
    bulky = args.model_cache_mb is not None
    await asyncio.gather(
        *(
            client_loop(
                base_url, args.seed + i, deadline, args.max_requests, tally, models, X, y, bulky
            )
            for i in range(args.clients)
        )
    )
    stop.set()
    await sampler
    return tally, samples


def seed_models(base_url: str) -> list[str]:
    """One model of each training type (ids), and their names: what the predictions ask for."""
    X, y = load_iris(return_X_y=True)
    refs = []
    for model_type, params in TRAIN_TYPES.items():
        Xt, yt = (X[:100], y[:100]) if model_type == "em_svm" else (X, y)
        body = {
            "model_type": model_type,
            "name": f"soak-{model_type}",
            "params": params,
            "X": Xt.tolist(),
            "y": yt.tolist(),
        }
        response = httpx.post(f"{base_url}/train", json=body, timeout=REQUEST_TIMEOUT_S)
        response.raise_for_status()
        refs += [response.json()["model_id"], f"soak-{model_type}"]
    return refs


def slope_mb_per_min(samples: list[tuple[float, float, float]], column: int) -> tuple[float, float]:
    """Least-squares slope of RSS over the second half (MiB/min) and the residual sd (MiB)."""
    half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    if len(half) < 3:
        return float("nan"), float("nan")
    t = np.array([s[0] for s in half])
    r = np.array([s[column] for s in half])
    slope, intercept = np.polyfit(t, r, 1)
    residual_sd = float(np.std(r - (slope * t + intercept)))
    return float(slope * 60), residual_sd


def report(tally: Tally, samples: list, args: argparse.Namespace, pinned: bool) -> int:
    """Print the tables; the number of 5xx answers and transport errors."""
    print(
        f"soak: {args.clients} clients, {args.seconds:g} s, {tally.total} requests "
        f"({tally.total / args.seconds:.0f}/s); server on core {SERVER_CORE}, load on core "
        f"{LOAD_CORE}" + ("" if pinned else " (NOT pinned: fewer than 2 cores)")
    )
    print()
    print("| kind | requests | statuses | p50 ms | p99 ms |")
    print("|---|---:|---|---:|---:|")
    bad = 0
    for kind in ("predict", "train", "train_bg", "job_poll", "list_models"):
        lat = np.array(tally.latencies.get(kind, [])) * 1000
        if lat.size == 0:
            continue
        statuses = tally.statuses[kind]
        bad += sum(n for s, n in statuses.items() if not s.isdigit() or s.startswith("5"))
        shown = ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items()))
        p50, p99 = np.percentile(lat, [50, 99])
        print(f"| {kind} | {lat.size} | {shown} | {p50:.1f} | {p99:.1f} |")
    print()
    print("| RSS (MiB) | start | peak | end | slope, 2nd half (MiB/min) | residual sd (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, column in (("server process", 1), ("server + training workers", 2)):
        values = [s[column] for s in samples]
        slope, sd = slope_mb_per_min(samples, column)
        print(
            f"| {label} | {values[0]:.1f} | {max(values):.1f} | {values[-1]:.1f} | "
            f"{slope:+.2f} | {sd:.2f} |"
        )
    slope, sd = slope_mb_per_min(samples, 1)
    drift = abs(slope) * (samples[-1][0] / 2) / 60
    verdict = "flat (within noise)" if drift <= max(3 * sd, 1.0) else "GROWING"
    cache = [s[3] for s in samples if s[3] == s[3]]
    if args.model_cache_mb is not None and cache:
        over = max(cache) > args.model_cache_mb
        bad += int(over)
        print()
        print(
            f"model cache: cap {args.model_cache_mb:g} MiB, peak {max(cache):.1f} MiB, end "
            f"{cache[-1]:.1f} MiB ({'OVER THE CAP' if over else 'under the cap'}); "
            f"{len(tally.trained)} synchronous trainings stored during the soak"
        )
    print()
    print(
        f"server RSS over the second half: {drift:.2f} MiB drift vs {sd:.2f} MiB noise: {verdict}; "
        f"5xx or transport errors: {bad}"
    )
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--max-requests", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model-cache-mb",
        type=float,
        default=None,
        help="small-cache mode: BSVM_MODEL_CACHE_MB, bulky trainings, predicts of new models",
    )
    args = parser.parse_args()
    pinned = len(os.sched_getaffinity(0)) >= 2 and {SERVER_CORE, LOAD_CORE} <= os.sched_getaffinity(
        0
    )
    with tempfile.TemporaryDirectory(prefix="bsvm-soak-") as data_dir:
        extra = {} if args.model_cache_mb is None else {"model_cache_mb": str(args.model_cache_mb)}
        server, base_url = start_server(
            Path(data_dir), core=SERVER_CORE if pinned else None, **extra
        )
        try:
            if pinned:
                pin({LOAD_CORE})
            models = seed_models(base_url)
            tally, samples = asyncio.run(run_load(args, base_url, server.pid, models))
        finally:
            stop_server(server)
    sys.exit(1 if report(tally, samples, args, pinned) else 0)


if __name__ == "__main__":
    main()
