"""The batched working-set solver: same optimum as an interior-point QP and as libsvm, on every path.

Small working sets (ws_size) force many outer iterations, FIFO halves, shrinking and the
gradient reconstruction that ends it, on problems small enough for an exact reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from bsvm_core import kernel_dual
from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.kernels import kernel_block_function, kernel_diagonal, kernel_matrix
from bsvm_core.solvers.batched_smo import (
    batched_smo_solve,
    reconstruct_gradient,
    select_violators,
    up_low_masks,
    working_set_size,
)
from bsvm_core.solvers.smo import DualDivergence, hull_distance_bound

from .test_smo import clarabel_dual, problem

ARGS = {"gamma": 0.5, "degree": 2, "coef0": 1.0}


def batched(X: np.ndarray, y: np.ndarray, kernel: str, C: float, **kw: object) -> object:
    dtype = kw.pop("dtype", np.float64)
    return batched_smo_solve(
        kernel_block_function(X, kernel, dtype=dtype, **ARGS),
        kernel_diagonal(X, kernel, **ARGS),
        y,
        C,
        dtype=dtype,
        **kw,
    )


def exact_f(K: np.ndarray, y: np.ndarray, a: np.ndarray) -> np.ndarray:
    """F = −y∘∇f = y − K(α∘y) from scratch."""
    return y - K @ (a * y)


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
@pytest.mark.parametrize("C", [0.1, 10.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shrinking", [True, False])
def test_objective_matches_interior_point(
    kernel: str, C: float, dtype: type, shrinking: bool
) -> None:
    X, y = problem(200)
    res = batched(X, y, kernel, C, tol=1e-6, ws_size=16, dtype=dtype, shrinking=shrinking)
    K = kernel_matrix(X, X, kernel, **ARGS)
    assert res.converged
    # float32 kernel rows: the optimum of a problem perturbed by ~1e-7 relative
    rel = 1e-6 if dtype is np.float64 else 1e-5
    assert res.objective == pytest.approx(clarabel_dual(K, y, C), rel=rel)
    a = res.alpha
    assert np.all(a >= 0.0) and np.all(a <= C)
    assert abs(float(a @ y)) < 1e-9 * max(1.0, float(a.sum()))


@pytest.mark.parametrize("kernel", ["rbf", "sigmoid"])
@pytest.mark.parametrize("shrinking", [True, False])
def test_kkt_conditions_hold_with_exact_gradient(kernel: str, shrinking: bool) -> None:
    """Stopping rule m − M < tol holds for F recomputed from scratch (sigmoid: not PSD)."""
    X, y = problem(240, seed=1)
    C, tol = 2.0, 1e-4
    res = batched(X, y, kernel, C, tol=tol, ws_size=20, shrinking=shrinking)
    K = kernel_matrix(X, X, kernel, **ARGS)
    a = res.alpha
    F = exact_f(K, y, a)
    up, low = up_low_masks(a, y, C)
    assert res.converged
    assert F[up].max() - F[low].min() < tol * (1 + 1e-6)
    assert res.objective == pytest.approx(0.5 * a @ (y[:, None] * y[None, :] * K) @ a - a.sum())


def test_whole_problem_in_one_working_set_equals_many() -> None:
    X, y = problem(150, seed=2)
    one = batched(X, y, "rbf", 1.0, tol=1e-7, ws_size=150)
    many = batched(X, y, "rbf", 1.0, tol=1e-7, ws_size=10)
    assert one.n_kernel_rows == 150
    assert many.n_kernel_rows > 150
    assert one.objective == pytest.approx(many.objective, rel=1e-9)


def test_hard_margin_separable_and_divergent() -> None:
    X, y = problem()
    res = batched(X, y, "rbf", math.inf, tol=1e-6, ws_size=16)
    K = kernel_matrix(X, X, "rbf", 0.5)
    assert res.converged
    np.testing.assert_array_less(1.0 - 1e-3, y * (K @ (res.alpha * y) + res.intercept))
    assert hull_distance_bound(res.alpha, exact_f(K, y, res.alpha), y) > 0
    # with C = inf the optimum is the large-C one once C exceeds every α
    assert res.objective == pytest.approx(clarabel_dual(K, y, 10 * res.alpha.max()), rel=1e-6)
    with pytest.raises(DualDivergence, match="convex hulls"):
        batched(X, y, "linear", math.inf, ws_size=16)


def test_reconstruct_gradient_is_exact() -> None:
    X, y = problem(90, seed=3)
    a = np.random.default_rng(0).uniform(0.0, 1.0, size=90) * (np.arange(90) % 3 > 0)
    K = kernel_matrix(X, X, "rbf", 0.5)
    F = np.zeros(90)
    idx = np.arange(0, 90, 4)
    store = np.empty(7 * idx.size)  # several chunks of support rows
    block = kernel_block_function(X, "rbf", dtype=np.float64, **ARGS)
    reconstruct_gradient(block, F, a, y, idx, store, np.float64)
    np.testing.assert_allclose(F[idx], exact_f(K, y, a)[idx], rtol=1e-12, atol=1e-12)
    assert np.all(F[np.setdiff1d(np.arange(90), idx)] == 0.0)


def test_select_violators_takes_both_extremes_once() -> None:
    F = np.array([5.0, -3.0, 4.0, 0.0, -4.0, 1.0])
    up = np.array([True, False, True, True, True, True])
    low = np.array([False, True, True, True, True, True])
    exclude = np.zeros(6, dtype=bool)
    chosen = select_violators(F, up, low, exclude, 4)
    assert sorted(chosen.tolist()) == [0, 1, 2, 4]  # largest F in I_up, smallest in I_low
    exclude[0] = True
    assert 0 not in select_violators(F, up, low, exclude, 4).tolist()
    assert select_violators(F, up, low, exclude, 5).size == 5  # filled beyond the extremes


def test_working_set_fits_the_cache() -> None:
    assert working_set_size(100_000, 200.0, 4) == 524
    assert working_set_size(1000, 200.0, 4) == 1000  # the whole problem
    assert working_set_size(5000, 200.0, 4) == 1024
    assert working_set_size(10**7, 1.0, 4) == 4


@pytest.mark.slow
def test_kernel_svm_matches_libsvm_on_the_batched_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """KernelSVM on the batched path: dual objective and predictions as SVC's (libsvm)."""
    monkeypatch.setattr(kernel_dual, "BATCHED_MIN_ROWS", 2000)
    X, y = make_classification(
        n_samples=3000, n_features=20, n_informative=10, flip_y=0.1, random_state=0
    )
    X = (X - X.mean(0)) / X.std(0)
    ours = KernelSVM(cache_mb=2.0).fit(X, y)  # q = 174: many outer iterations, shrinking
    assert ours.n_iter_[0] > 0
    svc = SVC().fit(X, y)
    c = svc.dual_coef_[0]
    S = X[svc.support_]
    sk_objective = 0.5 * float(c @ kernel_matrix(S, S, "rbf", svc._gamma) @ c) - np.abs(c).sum()
    assert ours.objective_[0] == pytest.approx(sk_objective, rel=1e-4)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.995
