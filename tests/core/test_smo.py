"""The SMO solver on its own: optimality against an interior-point QP, KKT conditions, the cache."""

from __future__ import annotations

import math

import clarabel
import numpy as np
import pytest
from scipy import sparse

from bsvm_core.kernels import kernel_diagonal, kernel_matrix, kernel_row_function
from bsvm_core.solvers.kernel_cache import KernelRowCache, cache_capacity
from bsvm_core.solvers.smo import DualDivergence, dual_objective, hull_distance_bound, smo_solve


def problem(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + X[:, 1] ** 2 - 1.0 + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def clarabel_dual(K: np.ndarray, y: np.ndarray, C: float) -> float:
    """Optimal value of min ½αᵀQα − eᵀα, yᵀα = 0, 0 ≤ α ≤ C by Clarabel (interior point)."""
    n = y.size
    Q = (y[:, None] * y[None, :]) * K + 1e-12 * np.eye(n)
    A = sparse.csc_matrix(np.vstack([y[None, :], -np.eye(n), np.eye(n)]))
    b = np.r_[0.0, np.zeros(n), np.full(n, C)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    solver = clarabel.DefaultSolver(
        sparse.triu(sparse.csc_matrix(Q)).tocsc(),
        -np.ones(n),
        A,
        b,
        [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(2 * n)],
        settings,
    )
    sol = solver.solve()
    assert str(sol.status) in ("Solved", "AlmostSolved"), sol.status
    return float(sol.obj_val)


def solve(X: np.ndarray, y: np.ndarray, kernel: str, C: float, **kw: object) -> object:
    args = {"gamma": 0.5, "degree": 2, "coef0": 1.0}
    return smo_solve(
        kernel_row_function(X, kernel, **args),
        kernel_diagonal(X, kernel, **args),
        y,
        C,
        **kw,
    )


@pytest.mark.parametrize("kernel", ["linear", "poly", "rbf"])
@pytest.mark.parametrize("C", [0.1, 10.0])
def test_objective_matches_interior_point(kernel: str, C: float) -> None:
    X, y = problem()
    res = solve(X, y, kernel, C, tol=1e-6)
    K = kernel_matrix(X, X, kernel, 0.5, 2, 1.0)
    assert res.converged
    assert res.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-6)


@pytest.mark.parametrize("kernel", ["rbf", "sigmoid"])
def test_kkt_conditions_and_intercept(kernel: str) -> None:
    X, y = problem(seed=1)
    C, tol = 2.0, 1e-4
    res = solve(X, y, kernel, C, tol=tol)
    K = kernel_matrix(X, X, kernel, 0.5, 2, 1.0)
    a = res.alpha
    assert np.all(a >= 0.0) and np.all(a <= C)
    assert abs(float(a @ y)) < 1e-10
    F = -y * ((y[:, None] * y[None, :] * K) @ a - 1.0)  # −y∘∇f from scratch
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    assert F[up].max() - F[low].min() < tol * (1 + 1e-6)
    assert res.objective == pytest.approx(0.5 * a @ (y[:, None] * y[None, :] * K) @ a - a.sum())
    # free support vectors sit on the margin: y f(x) = 1 up to tol
    f = K @ (a * y) + res.intercept
    free = (a > 1e-8) & (a < C - 1e-8)
    assert free.any()
    np.testing.assert_allclose(y[free] * f[free], 1.0, atol=2 * tol)


def test_tiny_cache_evicts_but_solves_the_same() -> None:
    X, y = problem(300)
    full = solve(X, y, "rbf", 1.0)
    tiny = solve(X, y, "rbf", 1.0, cache_mb=3 * 300 * 8 / 2**20)  # three rows
    assert tiny.n_kernel_rows > full.n_kernel_rows
    np.testing.assert_array_equal(tiny.alpha, full.alpha)
    assert tiny.intercept == full.intercept


def test_cache_is_bounded_and_lru() -> None:
    calls: list[int] = []

    def row(i: int, out: np.ndarray) -> None:
        calls.append(i)
        out[:] = i

    assert cache_capacity(1000, 1.0) == 131
    assert cache_capacity(10, 1.0) == 10 and cache_capacity(10**9, 1.0) == 2
    cache = KernelRowCache(row, 5, cache_mb=2 * 5 * 8 / 2**20)
    assert cache.block.shape == (2, 5)
    cache.row(0)
    cache.row(1)
    cache.row(0)  # hit; 1 is now least recently used
    assert cache.row(2)[0] == 2  # evicts 1
    cache.row(0)  # still cached
    cache.row(1)  # recomputed
    assert calls == [0, 1, 2, 1]


def test_max_iter_stops_unconverged() -> None:
    X, y = problem()
    res = solve(X, y, "rbf", 10.0, max_iter=7)
    assert res.n_iter == 7 and not res.converged


@pytest.mark.parametrize("C", [1.0, math.inf])
def test_resuming_a_stopped_run_takes_the_same_steps(C: float) -> None:
    X, y = problem(200)
    full = solve(X, y, "rbf", C, tol=1e-6)
    part = solve(X, y, "rbf", C, tol=1e-6, max_iter=25)
    assert not part.converged
    rest = solve(X, y, "rbf", C, tol=1e-6, start=part)
    assert rest.converged and rest.n_iter == full.n_iter
    np.testing.assert_array_equal(rest.alpha, full.alpha)  # same working sets, same steps
    assert rest.intercept == full.intercept


def test_stop_if_stops_only_when_its_test_says_so() -> None:
    X, y = problem(200)
    full = solve(X, y, "rbf", 1.0, tol=1e-6)
    seen: list[np.ndarray] = []
    go_on = solve(X, y, "rbf", 1.0, tol=1e-6, stop_if=(20, lambda a: seen.append(a) or False))
    assert len(seen) == 1 and np.count_nonzero(seen[0]) > 0
    np.testing.assert_array_equal(go_on.alpha, full.alpha)
    stop = solve(X, y, "rbf", 1.0, tol=1e-6, stop_if=(20, lambda a: True))
    assert stop.n_iter == 20 and not stop.converged
    np.testing.assert_array_equal(stop.alpha, seen[0])


def test_hard_margin_separable_and_divergent() -> None:
    X, y = problem()
    res = solve(X, y, "rbf", math.inf, tol=1e-6)  # rbf Gram is positive definite: separable
    K = kernel_matrix(X, X, "rbf", 0.5)
    assert res.converged
    # margin 1 up to tol and the float32 precision of the rbf exponential (as libsvm's cache)
    np.testing.assert_array_less(1.0 - 1e-3, y * (K @ (res.alpha * y) + res.intercept))
    assert hull_distance_bound(res.alpha, -y * (y * (K @ (res.alpha * y)) - 1.0), y) > 0
    with pytest.raises(DualDivergence, match="convex hulls"):
        solve(X, y, "linear", math.inf)
    Xd, yd = np.r_[X, X[:1]], np.r_[y, -y[:1]]  # one point with both labels
    with pytest.raises(DualDivergence):
        solve(Xd, yd, "rbf", math.inf)


def test_dual_objective_is_half_alpha_dot_minus_yf_minus_one_to_the_bit() -> None:
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(0, 60))
        dtype = np.float32 if trial % 2 else np.float64
        alpha = rng.random(n) * (rng.random(n) < 0.7)
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0).astype(dtype)
        F = (rng.normal(size=n) * 10.0 ** rng.integers(-8, 4)).astype(dtype)
        F[rng.random(n) < 0.2] = 0.0
        ones = rng.random(n) < 0.2
        F[ones] = -y[ones]  # -yF - 1 = 0 exactly
        ref = 0.5 * float(np.dot(alpha, -y * F - 1.0))
        assert np.float64(dual_objective(alpha, F, y)).tobytes() == np.float64(ref).tobytes()
