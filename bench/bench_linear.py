"""LinearSVM "auto" against LinearSVC(loss="hinge") and SVC(kernel="linear"): time, objective, RSS.

``python -m bench.bench_linear [--quick] [--sizes 100000x50 1000000x20]`` (or ``python -m bench
linear``). Data: standardised breast cancer and make_classification(n, d, random_state=0) at
10k×50, 100k×50 and 1M×20. LinearSVC runs with its defaults (dual coordinate descent, tol=1e-4,
max_iter=1000, intercept_scaling=1), C = 1 on both sides, in the same process, one after the other.

Objectives, honestly: LinearSVC penalises its intercept (it minimises P(w, b) + ½b², the intercept
being the weight of a constant feature), LinearSVM does not (P(w, b) = ½‖w‖² + C Σ hinge, libsvm's
problem). Each row scores both solutions under P, and also solves LinearSVC's own problem with
LinearSVM: ``fit_intercept=False`` on [X, 1], the same objective P + ½b², timed alone ("same
problem") and compared with LinearSVC's value of it. Every row gives median wall seconds, the CPU
seconds of the last fit (other jobs on a shared machine inflate wall time, not CPU time), the peak
RSS rise of each fit over the process's RSS before it (sampled every 5 ms; memory freed by an
earlier fit is reused, so a rise can read 0), the peak of LinearSVM's own allocations (tracemalloc,
which does not see liblinear's C allocations), the BLAS threads and the load average.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tracemalloc
import warnings
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC
from threadpoolctl import threadpool_info

from bsvm_core.linear_svm import SINGLE_THREAD_SIZE, LinearSVM
from bsvm_core.solvers.linear_objective import primal_objective

from .common import markdown_table, peak_rss_during, row, time_cpu, time_median

C = 1.0
SVC_MAX_N = 10_000
"""SVC(kernel="linear") is skipped above this size: libsvm's dual takes minutes there."""
ONE_REPEAT_FROM = 1_000_000
"""Fits on this many rows or more are timed once (LinearSVC takes minutes there)."""
SIZES = ((10_000, 50), (100_000, 50), (1_000_000, 20))
QUICK_SIZES = ((5_000, 50), (20_000, 50))


def _datasets(sizes: tuple[tuple[int, int], ...]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Standardised breast cancer and make_classification(n, d) for each (n, d)."""
    X, y = load_breast_cancer(return_X_y=True)
    out = [("breast_cancer (standardised)", StandardScaler().fit_transform(X), y)]
    for n, d in sizes:
        X, y = make_classification(n_samples=n, n_features=d, random_state=0)
        out.append((f"make_classification({n}, {d})", X, y))
    return out


def _objective(model: Any, X: np.ndarray, y: np.ndarray, intercept_penalty: bool = False) -> float:
    """P(w, b) at a fitted binary model's (coef_, intercept_), plus ½b² for LinearSVC's problem."""
    y_pm = np.where(y == model.classes_[1], 1.0, -1.0)
    b = float(model.intercept_[0])
    return primal_objective(X, y_pm, model.coef_[0], b, C) + (
        0.5 * b * b if intercept_penalty else 0
    )


def _fit(make: Any, X: np.ndarray, y: np.ndarray, repeat: int) -> tuple[float, float, float, Any]:
    """Median wall s, CPU s of the last fit, its peak RSS rise (MB) and the fitted model."""
    walls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(repeat):
            gc.collect()
            (wall, cpu, model), _, rise = peak_rss_during(
                lambda: time_cpu(lambda: make().fit(X, y))
            )
            walls.append(wall)
    return float(np.median(walls)), cpu, rise, model


def _numpy_peak_mb(make: Any, X: np.ndarray, y: np.ndarray) -> float:
    """Peak MB that one fit allocates through Python and numpy (tracemalloc; not C mallocs)."""
    gc.collect()
    tracemalloc.start()
    make().fit(X, y)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def _blas_threads() -> int:
    """The BLAS thread count numpy and scipy run with by default."""
    return max((m["num_threads"] for m in threadpool_info() if m["user_api"] == "blas"), default=1)


def _linear_svc_row(
    dataset: str, X: np.ndarray, y: np.ndarray, repeat: int, ours_run: tuple
) -> dict[str, Any]:
    """LinearSVM auto vs LinearSVC(hinge): both objectives, CPU, peak RSS, threads, load."""
    n, d = X.shape
    ours_fit, ours_cpu, ours_rss, ours, ours_pred = ours_run
    lin_fit, lin_cpu, lin_rss, lin = _fit(lambda: LinearSVC(loss="hinge", C=C), X, y, repeat)
    lin_pred, _ = time_median(lambda: lin.predict(X), max(repeat, 3))
    X1 = np.column_stack([X, np.ones(n)])
    same_fit, _, _, same = _fit(lambda: LinearSVM(C=C, fit_intercept=False), X1, y, repeat)
    p_ours, p_lin = _objective(ours, X, y), _objective(lin, X, y)
    q_lin = _objective(lin, X, y, intercept_penalty=True)
    q_same = _objective(same, X1, y)
    ours_threads = 1 if X.size >= SINGLE_THREAD_SIZE else _blas_threads()
    capped = ", hit max_iter=1000" if lin.n_iter_ >= 1000 else ""
    note = (
        f"C={C}; P (b free): ours {p_ours:.8g} vs LinearSVC {p_lin:.8g} "
        f"(rel {(p_ours - p_lin) / p_lin:+.1e}); LinearSVC's own P + ½b²: LinearSVC {q_lin:.8g} "
        f"({lin.n_iter_} it{capped}) vs LinearSVM on [X, 1] {q_same:.8g} "
        f"(rel {(q_same - q_lin) / q_lin:+.1e}) in {same_fit:.3f} s, {same_fit / lin_fit:.2f}x; "
        f"CPU s {ours_cpu:.2f} vs {lin_cpu:.2f} ({ours_cpu / lin_cpu:.2f}x); "
        f"peak RSS rise {ours_rss:.0f} MB vs {lin_rss:.0f} MB (data {X.nbytes / 2**20:.0f} MB; "
        f"ours allocates at most {_numpy_peak_mb(lambda: LinearSVM(C=C), X, y):.0f} MB, "
        f"tracemalloc); "
        f"BLAS threads ours {ours_threads}, liblinear 1; load {os.getloadavg()[0]:.1f}"
    )
    return row(
        "LinearSVM auto vs LinearSVC(hinge)",
        dataset,
        n,
        d,
        ours_fit_s=ours_fit,
        sk_fit_s=lin_fit,
        ours_predict_s=ours_pred,
        sk_predict_s=lin_pred,
        note=note,
    )


def _svc_row(
    dataset: str, X: np.ndarray, y: np.ndarray, repeat: int, ours_run: tuple
) -> dict[str, Any]:
    """LinearSVM auto vs SVC(kernel="linear"), the same problem (b unpenalised)."""
    n, d = X.shape
    ours_fit, _, _, ours, ours_pred = ours_run
    if n > SVC_MAX_N:
        note = f"SVC(kernel='linear') skipped above n={SVC_MAX_N}: too slow"
        return row("LinearSVM auto vs SVC(linear)", dataset, n, d, ours_fit_s=ours_fit, note=note)
    svc_fit, _, _, svc = _fit(lambda: SVC(kernel="linear", C=C), X, y, repeat)
    svc_pred, _ = time_median(lambda: svc.predict(X), max(repeat, 3))
    gap = float(np.abs(ours.coef_ - svc.coef_).max())
    note = (
        f"objective ours {_objective(ours, X, y):.8g} vs SVC {_objective(svc, X, y):.8g}; "
        f"max |Δcoef| {gap:.1e}"
    )
    return row(
        "LinearSVM auto vs SVC(linear)",
        dataset,
        n,
        d,
        ours_fit_s=ours_fit,
        sk_fit_s=svc_fit,
        ours_predict_s=ours_pred,
        sk_predict_s=svc_pred,
        note=note,
    )


def run(quick: bool = False, sizes: tuple[tuple[int, int], ...] | None = None) -> list[dict]:
    """Benchmark rows (bench.common format): LinearSVM vs LinearSVC and vs SVC linear."""
    rows = []
    for dataset, X, y in _datasets(sizes or (QUICK_SIZES if quick else SIZES)):
        repeat = 1 if quick or X.shape[0] >= ONE_REPEAT_FROM else 3
        ours_run = _fit(lambda: LinearSVM(C=C), X, y, repeat)
        ours_pred, _ = time_median(lambda m=ours_run[3], X=X: m.predict(X), max(repeat, 3))
        ours_run = (*ours_run, ours_pred)
        rows.append(_linear_svc_row(dataset, X, y, repeat, ours_run))
        rows.append(_svc_row(dataset, X, y, repeat, ours_run))
        sys.stderr.write(f"[bench_linear] {dataset} done\n")
    return rows


def _size(text: str) -> tuple[int, int]:
    """'100000x50' -> (100000, 50)."""
    n, d = text.lower().split("x")
    return int(n), int(d)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen sizes and print one Markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_linear", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5k×50 and 20k×50, one repeat")
    parser.add_argument(
        "--sizes", nargs="+", type=_size, metavar="NxD", help="make_classification sizes"
    )
    args = parser.parse_args(argv)
    rows = run(args.quick, tuple(args.sizes) if args.sizes else None)
    sys.stdout.write(markdown_table(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
