"""KernelSVM (rbf, C=1, gamma="scale") against scikit-learn's SVC (libsvm), side by side.

Data as in issue 11: make_classification(n, 20 features, 10 informative), standardised, at
n = 2k ... 100k; "hard" sets flip 20 % of the labels (flip_y=0.2), so most points become support
vectors. Every row gives the median wall time of each fit, the CPU seconds of the last one (load on
a shared machine inflates wall time, not CPU time), the dual objectives, the agreement of
predictions and the peak RSS of each fit (its rise over the process's RSS before the fit).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.kernels import rbf_kernel
from bsvm_core.workspace import kept_bytes

from .common import markdown_table, peak_rss_during, row, time_cpu, time_median

ONE_REPEAT_FROM = 50_000
"""Fits on this many rows or more are timed once (SVC takes minutes there)."""


def _sizes(quick: bool) -> list[tuple[int, float]]:
    """(rows, flip_y) of the make_classification sets: easy (0.01) and hard (0.2)."""
    sizes = [(2000, 0.01), (5000, 0.01)]
    if not quick:
        sizes += [(10_000, 0.01), (20_000, 0.01), (20_000, 0.2), (50_000, 0.01), (50_000, 0.2)]
        sizes += [(100_000, 0.01), (100_000, 0.2)]
    return sizes


def _datasets(
    quick: bool, only_rows: set[int] | None = None
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Breast cancer and digits (standardised), make_classification(n, 20, 10 informative); with
    ``only_rows``, the make_classification sets of those sizes alone. Made one at a time."""
    if only_rows is None:
        for name, loader in (("breast_cancer", load_breast_cancer), ("digits", load_digits)):
            X, y = loader(return_X_y=True)
            yield name, StandardScaler().fit_transform(X), y
    sizes = _sizes(bool(quick and only_rows is None))
    if only_rows is not None:  # any size asked for, listed or not: easy and hard
        sizes = [(n, flip) for n in sorted(only_rows) for flip in (0.01, 0.2)]
    for n, flip in sizes:
        X, y = make_classification(
            n_samples=n, n_features=20, n_informative=10, flip_y=flip, random_state=0
        )
        name = f"make_classification({n}, 20{', flip_y=0.2' if flip > 0.1 else ''})"
        yield name, StandardScaler().fit_transform(X), y


def _binary_objective(svc: SVC, X: np.ndarray) -> float:
    """libsvm's dual objective ½ cᵀKc − Σ|c| from SVC's dual_coef_ (binary), by row blocks."""
    c = svc.dual_coef_[0]
    S = X[svc.support_]
    Kc = np.concatenate(
        [rbf_kernel(S[i : i + 2000], S, svc._gamma) @ c for i in range(0, S.shape[0], 2000)]
    )
    return 0.5 * float(c @ Kc) - float(np.abs(c).sum())


def _fit(make: Any, X: np.ndarray, y: np.ndarray, repeat: int) -> tuple[float, float, float, Any]:
    """Median wall s, CPU s of the last fit, its peak RSS rise (MB) and the fitted model; sets of
    fewer than ``ONE_REPEAT_FROM`` rows get one untimed fit first (the first fit in a process pays
    one-off set-up, ~15 ms for KernelSVM: more than a small fit itself)."""
    if X.shape[0] < ONE_REPEAT_FROM:
        make().fit(X, y)
    walls = []
    for _ in range(repeat):
        gc.collect()
        (wall, cpu, model), _, rise = peak_rss_during(lambda: time_cpu(lambda: make().fit(X, y)))
        walls.append(wall)
    return float(np.median(walls)), cpu, rise, model


def run(quick: bool = False, only_rows: set[int] | None = None) -> list[dict[str, Any]]:
    """Benchmark rows (bench.common format): SVC rbf, C=1, gamma="scale", tol=1e-3."""
    rows = []
    for dataset, X, y in _datasets(quick, only_rows):
        repeat = 1 if quick or X.shape[0] >= ONE_REPEAT_FROM else 3
        ours_fit, ours_cpu, ours_rss, ours = _fit(KernelSVM, X, y, repeat)
        sk_fit, sk_cpu, sk_rss, sk = _fit(SVC, X, y, repeat)
        ours_pred, ours_labels = time_median(lambda X=X, m=ours: m.predict(X), repeat)
        sk_pred, sk_labels = time_median(lambda X=X, m=sk: m.predict(X), repeat)
        note = f"agree {100 * np.mean(ours_labels == sk_labels):.2f}%"
        note += f", iters {int(ours.n_iter_.sum())} vs {int(np.sum(sk.n_iter_))}"
        note += f", SVs {ours.support_.size} vs {sk.support_.size}"
        if ours.classes_.size == 2:
            rel = abs(ours.objective_[0] / _binary_objective(sk, X) - 1.0)
            note += f", dual obj rel diff {rel:.1e}"
        note += f"; CPU s {ours_cpu:.2f} vs {sk_cpu:.2f} ({ours_cpu / sk_cpu:.2f}x)"
        note += (
            f"; peak RSS rise of the fit {ours_rss:.0f} MB vs {sk_rss:.0f} MB"
            f" (data {X.nbytes / 2**20:.0f} MB, cache_mb 200; the solvers' workspace keeps"
            f" {kept_bytes() / 2**20:.0f} MB between fits, counted in the first fit's rise)"
        )
        rows.append(
            row(
                "KernelSVM rbf vs SVC",
                dataset,
                X.shape[0],
                X.shape[1],
                ours_fit_s=ours_fit,
                sk_fit_s=sk_fit,
                ours_predict_s=ours_pred,
                sk_predict_s=sk_pred,
                note=note,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.bench_kernel [--rows N ...]``: the large sets alone, a table per row."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_kernel", description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", help="make_classification sizes to run")
    args = parser.parse_args(argv)
    for n in args.rows or sorted({n for n, _ in _sizes(False)}):
        sys.stdout.write(markdown_table(run(only_rows={n})) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
