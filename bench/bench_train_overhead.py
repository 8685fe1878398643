"""Where a synchronous ``POST /train`` spends its time beyond the fit, stage by stage.

A real server (``python -m bench.bench_train_overhead --serve``: ``python -m service``'s uvicorn
options on the service's app) whose training functions are wrapped by stage timers in the
server process: the request's arrival and answer (an ASGI wrapper), ``prepare_task``,
``JobQueue.submit``, ``LocalExecutor.run`` and the worker's progress messages it relays (0.1: the
worker process runs; 0.15: the fit starts; 0.9: the model is evaluated), ``JobQueue._save`` and
``JobQueue.wait``. The fit's own seconds come from the record (``training.seconds``, timed in
the worker), so "evaluate" is the worker's time from 0.15 to 0.9 less the fit (metrics and plot
data). ``GET /bench/stages`` hands the events of the last training to the client.

The client posts breast cancer (569 × 30, raw; the SVMs standardise in their pipeline) as a JSON
body and as a CSV body (prebuilt bytes, so the client's encoding is not counted), over one
keep-alive connection, and fits the same pipeline in its own process between requests: "fit
alone" (median) is what the service adds its stages to. Run::

    .venv/bin/python -m bench.bench_train_overhead [--repeat 7] [--models kernel_svm lda em_svm]

For the model types with a ν path, "path ready" is how long after the 201 ``GET
/models/{id}/path`` first answers 200 (0 when it is in the record already).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from threadpoolctl import threadpool_limits

from bench.server import peak_rss_mb, process_tree, start_server, stop_server
from service.model_types import model_types

Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Any, Any], Awaitable[None]]
STAGES_PATH = "/bench/stages"
PATH_POLL_S = 0.01
STAGES = (
    ("body", "request", "prepare"),
    ("prepare_task", "prepare", "prepared"),
    ("schema check", "prepared", "submit"),
    ("job row + hand-off", "submit", "run"),
    ("worker start", "run", "p0.1"),
    ("worker set-up", "p0.1", "p0.15"),
    ("evaluate", "p0.15", "p0.9"),
    ("result back", "p0.9", "ran"),
    ("save", "ran", "saved"),
    ("wake the request", "saved", "waited"),
    ("answer", "waited", "answered"),
)
"""(stage, from event, to event); "evaluate" has the fit taken off."""

_events: dict[str, float] = {}
_events_lock = threading.Lock()


def mark(event: str) -> None:
    """Note the first time ``event`` happened during the current training."""
    now = time.perf_counter()
    with _events_lock:
        _events.setdefault(event, now)


def _timed(fn: Callable[..., Any], before: str, after: str) -> Callable[..., Any]:
    """``fn`` marking ``before`` on entry and ``after`` on exit."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(before)
        try:
            return fn(*args, **kwargs)
        finally:
            mark(after)

    return wrapper


def instrument() -> None:
    """Wrap the training's functions with stage marks (in the server process only)."""
    import service.api.routes.train as route
    from service.training.executors import LocalExecutor
    from service.training.queue import JobQueue

    route.prepare_task = _timed(route.prepare_task, "prepare", "prepared")
    JobQueue.submit = _timed(JobQueue.submit, "submit", "submitted")
    JobQueue._save = _timed(JobQueue._save, "save", "saved")
    JobQueue.wait = _timed(JobQueue.wait, "wait", "waited")
    run = LocalExecutor.run

    def run_marked(self: Any, task: Any, **kwargs: Any) -> Any:
        relay = kwargs.pop("on_progress", lambda f: None)

        def on_progress(fraction: float) -> None:
            if fraction in (0.1, 0.15, 0.9):
                mark(f"p{fraction:g}")
            relay(fraction)

        mark("run")
        try:
            return run(self, task, on_progress=on_progress, **kwargs)
        finally:
            mark("ran")

    LocalExecutor.run = run_marked


def create_bench_app() -> ASGI:
    """The service's app with stage marks, and ``GET /bench/stages`` (bench only)."""
    instrument()
    from service.api.app import create_app

    real = create_app()

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == STAGES_PATH:
            with _events_lock:
                body = json.dumps(_events).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and scope["path"] == "/train":
            with _events_lock:
                _events.clear()
            mark("request")

            async def send_marked(message: Any) -> None:
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    mark("answered")

            await real(scope, receive, send_marked)
            return
        await real(scope, receive, send)

    return app


def serve() -> None:
    """uvicorn with ``python -m service``'s options on ``create_bench_app``."""
    import uvicorn

    from service.__main__ import uvicorn_options
    from service.settings import Settings

    uvicorn.run("bench.bench_train_overhead:create_bench_app", **uvicorn_options(Settings()))


# -- the client's side ---------------------------------------------------------------------------
def bodies(model_type: str, X: np.ndarray, y: np.ndarray) -> dict[str, tuple[bytes, dict, dict]]:
    """The JSON and the CSV request of one training: (body bytes, headers, query)."""
    names = [f"f{j}" for j in range(X.shape[1])]
    fields = {"model_type": model_type, "name": f"bench-{model_type}", "feature_names": names}
    as_json = json.dumps({**fields, "X": X.tolist(), "y": y.tolist()}).encode()
    text = io.StringIO()
    text.write(",".join([*names, "label"]) + "\n")
    for row, label in zip(X, y, strict=True):
        text.write(",".join(repr(float(v)) for v in row) + f",{int(label)}\n")
    query = {"model_type": model_type, "target": "label", "name": f"bench-{model_type}-csv"}
    return {
        "json": (as_json, {"content-type": "application/json"}, {}),
        "csv": (text.getvalue().encode(), {"content-type": "text/csv"}, query),
    }


def fit_alone(model_type: str, X: np.ndarray, y: np.ndarray) -> float:
    """Seconds of the service's own pipeline fit (default params and preprocessing), here."""
    from service.training.fitting import with_preprocessing

    spec = model_types()[model_type]
    model = with_preprocessing(spec.make_estimator({}), spec.preprocess)
    with threadpool_limits(1):  # as the server's workers (OPENBLAS_NUM_THREADS=1)
        start = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - start


def path_ready(client: httpx.Client, model_id: str, timeout_s: float = 120.0) -> float:
    """Seconds until ``GET /models/{id}/path`` answers 200."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if client.get(f"/models/{model_id}/path").status_code == 200:
            return time.perf_counter() - start
        time.sleep(PATH_POLL_S)
    return float("nan")


def one_training(client: httpx.Client, body: bytes, headers: dict, query: dict) -> dict[str, float]:
    """One synchronous training: every stage in ms, the fit, the server and client totals."""
    start = time.perf_counter()
    r = client.post("/train", content=body, headers=headers, params=query)
    total = time.perf_counter() - start
    r.raise_for_status()
    record = r.json()
    events = client.get(STAGES_PATH).json()
    fit = float(record["training"]["seconds"])
    out = {}
    for stage, a, b in STAGES:
        seconds = events[b] - events[a] if a in events and b in events else float("nan")
        out[stage] = 1e3 * (seconds - fit if stage == "evaluate" else seconds)
    out["fit (in worker)"] = 1e3 * fit
    out["server total"] = 1e3 * (events["answered"] - events["request"])
    out["client total"] = 1e3 * total
    out["model_id"] = record["model_id"]
    if model_types()[record["model_type"]].nu_path:
        out["path ready"] = 1e3 * path_ready(client, record["model_id"])
    return out


def measure(url: str, models: list[str], repeat: int) -> dict[str, dict[str, Any]]:
    """Per model type and body: the median of every stage over ``repeat`` trainings, with the
    fit alone (in this process) timed between them."""
    X, y = load_breast_cancer(return_X_y=True)
    results: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=300) as client:
        for model_type in models:
            requests = bodies(model_type, X, y)
            fit_alone(model_type, X, y)  # warm this process's imports
            for kind, (body, headers, query) in requests.items():
                one_training(client, body, headers, query)  # warm the server's first call
                runs, alone = [], []
                for _ in range(repeat):
                    runs.append(one_training(client, body, headers, query))
                    alone.append(1e3 * fit_alone(model_type, X, y))
                keys = [k for k in runs[0] if k != "model_id"]
                row = {k: statistics.median(r[k] for r in runs) for k in keys}
                row["fit alone"] = statistics.median(alone)
                results[f"{model_type} {kind}"] = row
    return results


def report(results: dict[str, dict[str, Any]], rss: dict[str, float], repeat: int) -> str:
    """A Markdown table: a row per stage, a column per training (medians, ms)."""
    columns = list(results)
    stages = [s for s, _, _ in STAGES]
    rows = ["fit alone", "fit (in worker)", *stages, "server total", "client total", "path ready"]
    lines = [
        f"Synchronous POST /train, breast cancer 569 × 30, medians of {repeat} (ms)",
        "",
        "| stage | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for stage in rows:
        cells = [results[c].get(stage) for c in columns]
        if all(v is None for v in cells):
            continue
        shown = ["" if v is None or v != v else f"{v:.1f}" for v in cells]
        lines.append(f"| {stage} | " + " | ".join(shown) + " |")
    over = [results[c]["client total"] - results[c]["fit alone"] for c in columns]
    ratio = [results[c]["client total"] / results[c]["fit alone"] for c in columns]
    lines.append("| **client − fit alone** | " + " | ".join(f"**{v:.1f}**" for v in over) + " |")
    lines.append("| client / fit alone | " + " | ".join(f"{v:.1f}×" for v in ratio) + " |")
    lines.append("")
    lines.append(
        "peak RSS (VmHWM): "
        + ", ".join(f"{name} {mb:.0f} MiB" for name, mb in rss.items())
        + f"; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Start the instrumented server, train through it, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="trainings per model and body")
    parser.add_argument("--models", nargs="+", default=["kernel_svm", "lda", "em_svm"])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp), module=["bench.bench_train_overhead", "--serve"])
        try:
            results = measure(url, args.models, args.repeat)
            rss = {"server": peak_rss_mb(process.pid)}
            workers = [peak_rss_mb(pid) for pid in process_tree(process.pid)[1:]]
            if workers:
                rss["largest child"] = max(workers)
        finally:
            stop_server(process)
    rss["bench (fit alone)"] = peak_rss_mb(os.getpid())
    print(report(results, rss, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
