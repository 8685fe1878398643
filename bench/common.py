"""Timing and table helpers shared by the benchmark modules."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

COLUMNS = ("task", "dataset", "n", "d", "ours_fit_s", "sk_fit_s", "ours_predict_s", "sk_predict_s")


def time_median(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median wall-clock seconds of ``repeat`` calls of ``fn`` and the last call's result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def _rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc/self/statm), 0 where unavailable."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss_during(fn: Callable[[], Any], every_s: float = 0.005) -> tuple[Any, float, float]:
    """Call ``fn``; return its result, the peak RSS in MB while it ran and its rise over the start.

    A thread samples /proc/self/statm every ``every_s`` seconds, so the peak of one process can be
    taken per call (ru_maxrss only ever grows). Spikes shorter than ``every_s`` can be missed.
    """
    start = _rss_bytes()
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            peak[0] = max(peak[0], _rss_bytes())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = fn()
    finally:
        done.set()
        thread.join()
    peak[0] = max(peak[0], _rss_bytes())
    return result, peak[0] / 2**20, (peak[0] - start) / 2**20


def time_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall-clock and process CPU seconds of one call of ``fn`` and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def row(task: str, dataset: str, n: int, d: int, **values: Any) -> dict[str, Any]:
    """One benchmark row: timings in seconds (None when not measured) and a free-text note."""
    out: dict[str, Any] = {"task": task, "dataset": dataset, "n": n, "d": d, "note": ""}
    out.update(values)
    return out


def _fmt_s(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _fmt_ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs <= 0:
        return "–"
    return f"{ours / theirs:.2f}x"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Render rows as a Markdown table with fit/predict medians and ours/scikit-learn ratios."""
    head = (
        "| task | dataset | n | d | fit ours (s) | fit sklearn (s) | fit ratio | "
        "predict ours (s) | predict sklearn (s) | predict ratio | note |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['dataset']} | {r['n']} | {r['d']} | "
            f"{_fmt_s(r.get('ours_fit_s'))} | {_fmt_s(r.get('sk_fit_s'))} | "
            f"{_fmt_ratio(r.get('ours_fit_s'), r.get('sk_fit_s'))} | "
            f"{_fmt_s(r.get('ours_predict_s'))} | {_fmt_s(r.get('sk_predict_s'))} | "
            f"{_fmt_ratio(r.get('ours_predict_s'), r.get('sk_predict_s'))} | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def binary_tensor_body(X: np.ndarray, binary_labels: bool) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of an Open Inference Protocol request with ``X`` as binary FP64 data,
    asking for labels only, as binary INT64 data when ``binary_labels``."""
    data = np.ascontiguousarray(X, dtype="<f8").tobytes()
    tensor = {"name": "x", "shape": list(X.shape), "datatype": "FP64"}
    tensor["parameters"] = {"binary_data_size": len(data)}
    label: dict[str, Any] = {"name": "label"}
    if binary_labels:
        label["parameters"] = {"binary_data": True}
    head = json.dumps({"inputs": [tensor], "outputs": [label]}).encode()
    headers = {"Content-Type": "application/octet-stream"}
    headers["Inference-Header-Content-Length"] = str(len(head))
    return head + data, headers
