"""Memory estimates before fitting: an upper bound on the joblib dump, within 2× + a constant."""

from __future__ import annotations

import io
import warnings
from typing import Any

import joblib
import numpy as np
import pytest

from bsvm_core import (
    LDA,
    QDA,
    BayesianSVM,
    BsvmValueError,
    KernelSVM,
    LinearSVM,
    estimate_artifact_bytes,
    estimate_fit_bytes,
)

SLACK = 20_000
"""The "small constant" of the bound: pickled Python objects, labels, headers."""

ESTIMATORS = [
    LinearSVM(),
    LinearSVM(multiclass="ovo", probability=True, random_state=0),
    LinearSVM(solver="subgradient", max_iter=20),
    KernelSVM(C=0.01),  # every point is a support vector: the bound is reached
    KernelSVM(C=0.01, multiclass="ovr", probability=True, random_state=0),
    LDA(),
    QDA(),
    BayesianSVM(),
    BayesianSVM(method="ecme", max_iter=50),
    BayesianSVM(method="mcmc", n_draws=200, burn_in=5, n_chains=2, random_state=0),
    BayesianSVM(method="spike_slab", n_draws=300, burn_in=5, n_chains=3, random_state=0),
    BayesianSVM(method="mcmc", fit_intercept=False, n_draws=40, burn_in=5, random_state=0),
    BayesianSVM(
        method="mcmc", multiclass="ovo", n_draws=100, burn_in=5, n_chains=2, random_state=0
    ),
]


def _traced_fit_peak(estimator: Any, X: np.ndarray, y: np.ndarray) -> int:
    """Peak bytes Python's allocator traced during ``estimator.fit(X, y)`` (numpy's included)."""
    import tracemalloc

    tracemalloc.start()
    try:
        estimator.fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _dump_size(estimator: object) -> int:
    buffer = io.BytesIO()
    joblib.dump(estimator, buffer)
    return len(buffer.getvalue())


@pytest.mark.parametrize("shape", [(60, 3, 2), (90, 5, 3), (120, 30, 4)])
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_estimate_bounds_the_dump(estimator, shape: tuple[int, int, int]) -> None:
    n, d, K = shape
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, d))
    y = np.array([f"class-{k}" for k in np.arange(n) % K])
    estimate = estimate_artifact_bytes(estimator, n, d, K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = estimator.__class__(**estimator.get_params()).fit(X, y)
    actual = _dump_size(fitted)
    assert actual <= estimate <= 2 * actual + SLACK
    assert estimate_fit_bytes(estimator, n, d, K) >= estimate


def test_mcmc_estimate_scales_with_draws_chains_problems_and_features() -> None:
    small = estimate_artifact_bytes(BayesianSVM(method="mcmc", n_draws=1000), 100, 4, 3)
    big = estimate_artifact_bytes(BayesianSVM(method="mcmc", n_draws=8000, n_chains=8), 100, 4, 3)
    # 8000 draws × 8 chains × 3 problems × (2·4 + 2) float64 = 15.36 MB
    assert big - small == pytest.approx(8 * 3 * 10 * (8000 * 8 - 1000 * 4), rel=1e-6)


def test_kernel_cache_counts_in_the_fit_estimate() -> None:
    # 5,000 rows: kernel_cache's float64 rows (200 MB whole), capped by cache_mb
    small = estimate_fit_bytes(KernelSVM(cache_mb=1), 5000, 10, 2)
    large = estimate_fit_bytes(KernelSVM(cache_mb=100), 5000, 10, 2)
    assert large - small == 100 * 2**20 - 2**20
    # 9,000 rows: the batched solver's float32 rows, capped by the whole float32 Gram matrix
    small = estimate_fit_bytes(KernelSVM(cache_mb=1), 9000, 10, 2)
    large = estimate_fit_bytes(KernelSVM(cache_mb=1000), 9000, 10, 2)
    assert large - small == 4 * 9000 * 9000 - 2**20


def test_kernel_estimate_is_an_upper_bound_with_few_support_vectors() -> None:
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-5, 1, (100, 2)), rng.normal(5, 1, (100, 2))]
    fitted = KernelSVM(kernel="linear").fit(X, np.repeat([0, 1], 100))
    assert fitted.support_.size < 10
    assert _dump_size(fitted) <= estimate_artifact_bytes(KernelSVM(kernel="linear"), 200, 2, 2)


@pytest.mark.parametrize(("args", "name"), [((0, 2, 2), "n_samples"), ((5, 2, 1), "n_classes")])
def test_bad_shapes_are_named(args: tuple, name: str) -> None:
    with pytest.raises(BsvmValueError, match=name):
        estimate_artifact_bytes(LDA(), *args)


@pytest.mark.parametrize("n", [1200, 3200])
def test_kernel_estimate_bounds_a_large_c_fit_with_newton_steps(n: int) -> None:
    """Noisy data at C = 100: faces of hundreds of free points, whose Newton steps gather their
    rows (a whole matrix below 3,000 rows, cached rows above); the traced peak stays within."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n, 8, n_informative=5, flip_y=0.2, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    estimator = KernelSVM(C=100.0, cache_mb=50)
    peak = _traced_fit_peak(estimator, X, y)
    assert estimator.n_iter_.max() > 0
    assert peak <= estimate_fit_bytes(estimator, n, 8, 2)


def test_kernel_estimate_bounds_a_batched_fit_polished_in_float64(
    checked_gaps: list[float],
) -> None:
    """moons(8,000) at C = 1,000 on float32 rows: the end point's float64 check fails and the
    solve goes on on float64 rows (over the float32 rows' bytes); the traced peak stays within."""
    from sklearn.datasets import make_moons

    X, y = make_moons(8000, noise=0.3, random_state=0)
    estimator = KernelSVM(C=1000.0, cache_mb=20)
    peak = _traced_fit_peak(estimator, X, y)
    assert checked_gaps and checked_gaps[0] >= estimator.tol
    assert peak <= estimate_fit_bytes(estimator, 8000, 2, 2)
