"""predict_interval from a server's request threads: 20,000 rows × 8,000 draws × 3 problems, ten
requests one after another on a pool of two live threads (as FastAPI's threadpool runs them).

``python -m bench.bench_interval_threads [checkout ...]`` prints each checkout's median and the
requests' seconds (default: this checkout). It shows the BLAS guard from any thread: with
threadpoolctl 3.6+ only the first thread that set OpenBLAS's count could set it again, so the
other thread's requests ran the products on BLAS's own threads beside ours.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

ROWS, REQUESTS = 20000, 10


def measure() -> None:
    """Fit the bench's iris MCMC, run the requests, print the line."""
    import numpy as np
    from sklearn.datasets import load_iris

    from bsvm_core import BayesianSVM

    X_iris, y = load_iris(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianSVM(method="mcmc", alpha=2.0, n_draws=2000, burn_in=200, random_state=0)
        est.fit(X_iris, y)
    rng = np.random.default_rng(0)
    X = X_iris[rng.integers(0, len(X_iris), ROWS)] + rng.normal(0, 0.1, (ROWS, 4))
    one_at_a_time = threading.Lock()

    def request(_: int) -> tuple[float, str]:
        with one_at_a_time:
            start = time.perf_counter()
            est.predict_interval(X)
            return time.perf_counter() - start, threading.current_thread().name

    with ThreadPoolExecutor(2) as pool:
        out = list(pool.map(request, range(REQUESTS)))
    seconds = [t for t, _ in out]
    print(
        f"{os.getcwd()}: {len({n for _, n in out})} threads, median {statistics.median(seconds):.3f} s "
        f"({' '.join(f'{t:.2f}' for t in seconds)}); load {os.getloadavg()[0]:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure here, or with each checkout's ``bsvm_core`` (a process each, alternately twice)."""
    checkouts = sys.argv[1:] if argv is None else argv
    if not checkouts:
        measure()
        return 0
    for _ in range(2):
        for tree in checkouts:
            env = {**os.environ, "PYTHONPATH": tree}
            subprocess.run([sys.executable, __file__], cwd=tree, env=env, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
