"""CSV predict of 100,000 rows: ``POST /predict`` against the core's own ``predict``, side by side.

The model is the load bench's: KernelSVM (rbf, C = 1, gamma = scale) on scikit-learn's
standardised breast-cancer data, trained through ``POST /train`` with the feature names. The rows
are breast-cancer-like: the 569 standardised rows tiled to ``--rows`` with N(0, 0.1²) noise, 30
columns written with 6 significant digits under a header of the feature names (a 100,000-row
body is ~30 MB, so the server runs with ``BSVM_MAX_BODY_MB=256``). In one run:

* ``core`` — the same estimator as the server stores (a StandardScaler, kernel_svm's default
  preprocessing, then the KernelSVM, fitted here on the same data; its labels are checked equal
  to the server's) ``predict`` on the float64 array, pinned to core 0 like the server;
* ``csv → json`` / ``csv → csv`` — the CSV body posted (client on core 1, server on core 0),
  answered as JSON or, with ``Accept: text/csv``, as CSV; the time runs from the request to the
  last byte of the answer (the client does not decode it);
* ``json → json`` — the same rows as a JSON body, for information;
* ``binary → binary`` — the same float64 rows as Open Inference Protocol binary tensor data on
  ``/v2/models/{id}/infer``, labels asked for as binary data (checked equal to the core's).

Each figure is the median of ``--repeat`` calls; the server's peak RSS (``VmHWM``, reset before
each body kind) and the bench's own peak RSS are printed next to it. Run::

    .venv/bin/python -m bench.bench_csv_predict            # 100,000 rows
    .venv/bin/python -m bench.bench_csv_predict --rows 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from bench.common import binary_tensor_body, peak_rss_during, time_median
from bench.server import peak_rss_mb, reset_peak_rss, start_server, stop_server
from bsvm_core.kernel_svm import KernelSVM
from service.training.fitting import with_preprocessing

PARAMS = {"C": 1.0, "kernel": "rbf", "gamma": "scale"}
SERVER_CORE, CLIENT_CORE = 0, 1
NOISE = 0.1


def data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """(training X, training y, feature names, ``rows`` breast-cancer-like rows to score)."""
    bunch = load_breast_cancer()
    X = StandardScaler().fit_transform(bunch.data)
    rng = np.random.default_rng(seed)
    Z = X[rng.integers(0, len(X), rows)] + NOISE * rng.standard_normal((rows, X.shape[1]))
    return X, bunch.target, [str(name) for name in bunch.feature_names], Z


def csv_body(names: list[str], Z: np.ndarray) -> bytes:
    """The rows as CSV text: a header of ``names``, values with 6 significant digits."""
    buffer = io.StringIO()
    np.savetxt(buffer, Z, fmt="%.6g", delimiter=",", header=",".join(names), comments="")
    return buffer.getvalue().encode()


def pinned(core: int) -> None:
    """Run this process on ``core`` from now on."""
    os.sched_setaffinity(0, {core})


def binary_labels(response: httpx.Response) -> np.ndarray:
    """The INT64 labels of a V2 response whose only output is binary labels."""
    length = int(response.headers["Inference-Header-Content-Length"])
    return np.frombuffer(response.content[length:], dtype="<i8")


def timed_post(
    client: httpx.Client, repeat: int, path: str = "/predict", **request
) -> tuple[float, httpx.Response]:
    """Median seconds of ``repeat`` posts to ``path`` (body read, not decoded), last answer."""
    times, response = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.post(path, **request)
        response.read()
        times.append(time.perf_counter() - started)
        response.raise_for_status()
    return float(np.median(times)), response


def main(argv: list[str] | None = None) -> int:
    """Start the server, train, time the core and the four body kinds; print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    X, y, names, Z = data(args.rows)
    body = csv_body(names, Z)
    Zcsv = np.loadtxt(io.StringIO(body.decode()), delimiter=",", skiprows=1, ndmin=2)
    json_body = json.dumps({"model": "", "X": Zcsv.tolist(), "feature_names": names})
    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.rows} rows x {len(names)} features; "
        f"CSV body {len(body) / 2**20:.1f} MB, JSON body {len(json_body) / 2**20:.1f} MB; "
        f"median of {args.repeat}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(
            Path(tmp), core=SERVER_CORE, max_body_mb="256", max_rows=str(max(args.rows, 1))
        )
        try:
            with httpx.Client(base_url=url, timeout=600) as client:
                train = {"model_type": "kernel_svm", "params": PARAMS, "X": X.tolist()}
                train |= {"y": y.tolist(), "feature_names": names}
                model_id = client.post("/train", json=train).raise_for_status().json()["model_id"]
                estimator = with_preprocessing(KernelSVM(**PARAMS), "standard").fit(X, y)
                pinned(SERVER_CORE)
                (core_s, labels), core_rss, _ = peak_rss_during(
                    lambda: time_median(lambda: estimator.predict(Zcsv), args.repeat)
                )
                pinned(CLIENT_CORE)
                rows = [("core predict", core_s, "–", f"{core_rss:.0f} (bench)")]
                csv_request = {
                    "content": body,
                    "params": {"model": model_id},
                    "headers": {"Content-Type": "text/csv"},
                }
                kinds = {
                    "csv → json": csv_request,
                    "csv → csv": {
                        **csv_request,
                        "headers": {"Content-Type": "text/csv", "Accept": "text/csv"},
                    },
                    "json → json": {
                        "content": json_body.replace('"model": ""', f'"model": "{model_id}"'),
                        "headers": {"Content-Type": "application/json"},
                    },
                }
                binary_body, binary_headers = binary_tensor_body(Zcsv, binary_labels=True)
                kinds["binary → binary"] = {
                    "path": f"/v2/models/{model_id}/infer",
                    "content": binary_body,
                    "headers": binary_headers,
                }
                for kind, request in kinds.items():
                    reset_peak_rss(server.pid)
                    seconds, response = timed_post(client, args.repeat, **request)
                    if kind in ("csv → json", "binary → binary"):
                        served = (
                            binary_labels(response)
                            if kind == "binary → binary"
                            else np.asarray(response.json()["predictions"])
                        )
                        if not np.array_equal(served, labels):
                            raise AssertionError(
                                f"{kind}: the server's labels differ from the core's"
                            )
                    rows.append(
                        (kind, seconds, f"{seconds / core_s:.2f}x", peak_rss_mb(server.pid))
                    )
        finally:
            stop_server(server)
    print("| path | seconds | ratio to core | peak RSS MB |")
    print("|---|---|---|---|")
    for kind, seconds, ratio, rss in rows:
        rss_text = rss if isinstance(rss, str) else f"{rss:.0f} (server)"
        print(f"| {kind} | {seconds:.3f} | {ratio} | {rss_text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
