"""predict_interval at scale: 20,000 rows × 8,000 draws × 3 one-vs-rest problems (iris MCMC).

``python -m bench.bench_interval [--quick]`` fits BayesianSVM(method="mcmc") on iris with 4 chains
× 2,000 draws, then times ``predict_interval`` (blocked selection, ``bsvm_core.draw_quantiles``;
the draws screened per block, ``bsvm_core.screened_quantiles``), the same blocked selection
computing every value (``screen=False``, two threads: the implementation before the screen),
and two references that compute the same numbers: the naive full-matrix
``np.quantile`` of X̃W̃ (one problem at a time, 1.3 GB each) and the previous implementation
(2,048-row chunks of the full decision tensor, ``np.quantile``). Each row prints the median wall
time and CPU time, the peak extra memory of the call (tracemalloc: numpy's allocations), the process's peak
RSS so far, the ratio to the naive reference, the largest difference from it and the machine's
1-minute load average when the row finished (other jobs share the cores: compare ratios).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.datasets import load_iris

from bsvm_core import BayesianSVM
from bsvm_core.draw_quantiles import projection_quantiles

LEVEL = 0.95


def _naive_full(X: np.ndarray, coef: np.ndarray, b0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.quantile of the whole (n, G) matrix X̃W̃, one problem at a time."""
    q = [(1 - LEVEL) / 2, (1 + LEVEL) / 2]
    Xt = np.column_stack([np.ones(X.shape[0]), X])
    lower, upper = np.empty((X.shape[0], coef.shape[1])), np.empty((X.shape[0], coef.shape[1]))
    for p in range(coef.shape[1]):
        F = Xt @ np.vstack([b0[:, p], coef[:, p, :].T])
        lower[:, p], upper[:, p] = np.quantile(F, q, axis=1)
        del F
    return lower, upper


def _previous(X: np.ndarray, coef: np.ndarray, b0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The implementation before blocked selection: 2,048-row chunks of (rows, draws, problems)."""
    q = [(1 - LEVEL) / 2, (1 + LEVEL) / 2]
    lower, upper = np.empty((X.shape[0], coef.shape[1])), np.empty((X.shape[0], coef.shape[1]))
    for start in range(0, X.shape[0], 2048):
        rows = slice(start, start + 2048)
        f = np.einsum("nd,gcd->ngc", X[rows], coef) + b0
        lower[rows], upper[rows] = np.quantile(f, q, axis=1)
    return lower, upper


def _unscreened(X: np.ndarray, coef: np.ndarray, b0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The blocked selection over every value (no screen), two threads, one problem at a time."""
    q = ((1 - LEVEL) / 2, (1 + LEVEL) / 2)
    lower, upper = np.empty((X.shape[0], coef.shape[1])), np.empty((X.shape[0], coef.shape[1]))
    for p in range(coef.shape[1]):
        W = coef[:, p, :].T
        lower[:, p], upper[:, p] = projection_quantiles(
            X, W, b0[:, p], q, n_threads=2, screen=False
        )
    return lower, upper


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _measure(fn: Callable[[], tuple], repeat: int) -> tuple[float, float, float, tuple]:
    """(median wall seconds, median CPU seconds of the process, peak extra MB, result)."""
    times, cpu, result = [], [], ()
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return float(np.median(times)), float(np.median(cpu)), peak / 2**20, result


def main(argv: list[str] | None = None) -> int:
    """Fit the model, run the three computations and print a Markdown table."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_interval", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000 rows × 2,000 draws")
    parser.add_argument("--rows", type=int, default=20000, help="rows to score (not --quick)")
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="skip the previous and naive computations (the naive one needs 120 kB per row)",
    )
    args = parser.parse_args(argv)
    n_rows, n_draws = (2000, 500) if args.quick else (args.rows, 2000)
    X_iris, y = load_iris(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianSVM(method="mcmc", alpha=2.0, n_draws=n_draws, burn_in=200, random_state=0)
        est.fit(X_iris, y)
    rng = np.random.default_rng(0)
    X = X_iris[rng.integers(0, len(X_iris), n_rows)] + rng.normal(0, 0.1, (n_rows, 4))
    G = est.coef_draws_.shape[0] * est.coef_draws_.shape[1]
    coef = est.coef_draws_.reshape(G, 3, 4)
    b0 = est.intercept_draws_.reshape(G, 3)
    rows = []

    def blocked(n_jobs: int | None) -> Callable[[], tuple]:
        def run() -> tuple:
            est.n_jobs = n_jobs
            return est.predict_interval(X, LEVEL)

        return run

    cases = [
        ("blocked selection, n_jobs=1", blocked(1), 3),
        ("blocked selection, n_jobs=2", blocked(2), 3),
        (f"blocked selection, n_jobs=None ({os.cpu_count()} cores)", blocked(None), 3),
        ("every value (screen=False), n_jobs=2", lambda: _unscreened(X, coef, b0), 3),
    ]
    if not args.no_reference:
        cases += [
            ("previous: 2,048-row chunks + np.quantile", lambda: _previous(X, coef, b0), 1),
            ("naive: full matrix + np.quantile", lambda: _naive_full(X, coef, b0), 1),
        ]
    for name, fn, repeat in cases:
        seconds, cpu, extra_mb, result = _measure(fn, repeat)
        rows.append((name, seconds, cpu, extra_mb, _peak_rss_mb(), os.getloadavg()[0], result))
        sys.stderr.write(f"[bench_interval] {name}: {seconds:.3f} s\n")
    reference_s, reference = rows[-1][1], rows[-1][-1]
    print(f"{n_rows} rows × {G} draws × 3 problems (iris, one-vs-rest), level {LEVEL}")
    print(f"ratio and max abs diff against: {rows[-1][0]}\n")
    print(
        "| computation | seconds | CPU s | ratio | peak extra MB | peak RSS MB "
        "| max abs diff | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, seconds, cpu, extra_mb, rss, load, result in rows:
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(result, reference, strict=True))
        print(
            f"| {name} | {seconds:.3f} | {cpu:.3f} | {seconds / reference_s:.2f}x | {extra_mb:.1f} | "
            f"{rss:.0f} | {diff:.1e} | {load:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
