"""In-process CPU of a predict's scorers per block of rows: a model's plan against its estimator.

For a few model types behind a ``StandardScaler`` (scikit-learn's breast cancer data, 30
features; the kernel models' support vectors from a fit on every row; iris for the three-class
ones), the ``label`` and ``decision`` scorers a ``Servable`` holds with the plan
(``inference.planned``) and without it (``inference.scoring``: the pipeline's scaling, then the
estimator's method) score the same block of 1 or 100 rows, alternated call by call; each figure
is the median over ``--repeats`` rounds of the process CPU time of ``--calls`` calls, per call::

    .venv/bin/python -m bench.bench_row_plans [--calls 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from bsvm_core import LDA, BayesianSVM, KernelSVM, LinearSVM
from service.inference.planned import planned_scorers
from service.inference.scoring import scorer

MODELS: dict[str, tuple[str, Callable[[], Any]]] = {
    "KernelSVM rbf": ("cancer", KernelSVM),
    "KernelSVM rbf ovo (iris)": ("iris", KernelSVM),
    "KernelSVM linear": ("cancer", lambda: KernelSVM(kernel="linear")),
    "KernelSVM poly": ("cancer", lambda: KernelSVM(kernel="poly", coef0=1.0)),
    "KernelSVM sigmoid": ("cancer", lambda: KernelSVM(kernel="sigmoid", gamma=0.01)),
    "LinearSVM": ("cancer", LinearSVM),
    "LinearSVM ovr (iris)": ("iris", LinearSVM),
    "BayesianSVM em": ("cancer", lambda: BayesianSVM(method="em")),
    "LDA (iris)": ("iris", LDA),
}


def cpu_per_call(fn: Callable[[np.ndarray], Any], X: np.ndarray, calls: int) -> float:
    """Process CPU seconds per call of ``fn(X)``."""
    start = time.process_time()
    for _ in range(calls):
        fn(X)
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    data = {"cancer": load_breast_cancer(return_X_y=True), "iris": load_iris(return_X_y=True)}
    print("| model | output | rows | estimator µs | plan µs | ratio |")
    print("|---|---|---|---|---|---|")
    for name, (source, make) in MODELS.items():
        X, y = data[source]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pipe = Pipeline([("scale", StandardScaler()), ("model", make())]).fit(X, y)
        base = {"label": scorer(pipe, "predict"), "decision": scorer(pipe, "decision_function")}
        plan = planned_scorers(pipe, base)
        for output in ("label", "decision"):
            for n in (1, 100):
                rows = np.ascontiguousarray(np.resize(X, (n, X.shape[1])))
                est, ours = [], []
                for _ in range(args.repeats):
                    est.append(cpu_per_call(base[output], rows, args.calls))
                    ours.append(cpu_per_call(plan[output], rows, args.calls))
                a, b = statistics.median(est) * 1e6, statistics.median(ours) * 1e6
                print(f"| {name} | {output} | {n} | {a:.1f} | {b:.1f} | {b / a:.2f} |")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS (ru_maxrss) of the process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
