"""Timing and table helpers shared by the benchmark modules."""

from __future__ import annotations

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
