"""KernelSVM against SVC on small sets (issue 11: "small sets no slower than SVC"), interleaved.

Each set is standardised and fitted rbf, gamma="scale", tol=1e-3 at each C, alternating one SVC fit
and one KernelSVM fit ``--repeat`` times, so both see the same moments of a shared machine; the
table gives the median process CPU of each (small fits are milliseconds: wall time is noise), the
ratio, the dual objective's relative difference from libsvm's (binary sets), the agreement of the
training-set labels and the peak RSS of the process over the runs, next to the memory the solvers'
workspace keeps between fits (``bsvm_core.workspace``).

``python -m bench.bench_small_kernel [--repeat 21] [--C 1 10] [--sets breast digits]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator

import numpy as np
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_wine,
    make_classification,
    make_moons,
)
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.workspace import kept_bytes

from .bench_kernel import _binary_objective
from .common import _rss_bytes


def _sets() -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """The issue's sets (11 and 27), then other small ones: 3 and 10 classes, 3 classes past the
    shared matrix's 300 rows (pairs of ~240 and ~470 rows), 2 features, noisy labels."""
    yield "breast cancer", *load_breast_cancer(return_X_y=True)
    yield "digits (10 classes)", *load_digits(return_X_y=True)
    yield "wine (3 classes)", *load_wine(return_X_y=True)
    yield "moons(400, noise 0.3)", *make_moons(400, noise=0.3, random_state=0)
    X, y = make_classification(
        1000, 16, n_informative=8, n_classes=10, n_clusters_per_class=1, flip_y=0.05, random_state=0
    )
    yield "make_classification(1000, 16, 10 classes)", X, y
    for n in (356, 700):  # one-vs-one pairs of ~240 and ~470 rows: past the shared matrix's sets
        X, y = make_classification(
            n, 13, n_informative=8, n_classes=3, n_clusters_per_class=1, random_state=0
        )
        yield f"make_classification({n}, 13, 3 classes)", X, y
    for n in (300, 800, 1400, 3000):
        X, y = make_classification(n, 20, n_informative=10, flip_y=0.2, random_state=0)
        yield f"make_classification({n}, 20, flip_y=0.2)", X, y


def _cpu_fit(estimator: object, X: np.ndarray, y: np.ndarray) -> float:
    """Process CPU seconds of one ``estimator.fit(X, y)``."""
    start = time.process_time()
    estimator.fit(X, y)  # type: ignore[attr-defined]
    return time.process_time() - start


def run(repeat: int, Cs: list[float], only: list[str] | None = None) -> list[str]:
    """Markdown rows, one per set and C (only the sets whose names contain one of ``only``)."""
    lines = [
        "| set | n | C | SVC CPU ms | KernelSVM CPU ms | ratio | dual obj rel diff | agree | "
        "peak RSS MB | kept MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    peak = _rss_bytes()
    for name, X, y in _sets():
        if only and not any(word in name for word in only):
            continue
        X = StandardScaler().fit_transform(X)
        for C in Cs:
            sk_times, our_times = [], []
            for _ in range(repeat):
                sk_times.append(_cpu_fit(SVC(C=C), X, y))
                our_times.append(_cpu_fit(KernelSVM(C=C), X, y))
                peak = max(peak, _rss_bytes())
            sk, ours = SVC(C=C).fit(X, y), KernelSVM(C=C).fit(X, y)
            rel = "—"
            if ours.classes_.size == 2:
                rel = f"{abs(ours.objective_[0] / _binary_objective(sk, X) - 1.0):.1e}"
            agree = 100.0 * np.mean(ours.predict(X) == sk.predict(X))
            s, o = float(np.median(sk_times)), float(np.median(our_times))
            lines.append(
                f"| {name} | {X.shape[0]} | {C:g} | {1e3 * s:.2f} | {1e3 * o:.2f} | "
                f"**{o / s:.2f}x** | {rel} | {agree:.2f}% | {peak / 2**20:.0f} | "
                f"{kept_bytes() / 2**20:.1f} |"
            )
            sys.stdout.write(lines[-1] + "\n")
            sys.stdout.flush()
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the table row by row as the sets finish."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_small_kernel", description=__doc__)
    parser.add_argument("--repeat", type=int, default=21, help="fits of each, interleaved")
    parser.add_argument("--C", type=float, nargs="+", default=[1.0, 10.0], dest="Cs")
    parser.add_argument("--sets", nargs="+", help="only sets whose names contain one of these")
    args = parser.parse_args(argv)
    run(args.repeat, args.Cs, args.sets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
