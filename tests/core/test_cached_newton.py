"""Face Newton steps on a row cache (``solvers.cached_newton``, problems past
``kernel_dual.DENSE_MAX_ROWS``): the same step as on a whole D, the route, and the end point of a
noisy large-C problem above 3,000 rows (KKT within tol, the objective against libsvm's)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_moons
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core import KernelSVM, kernel_dual, kernel_matrices
from bsvm_core.kernels import kernel_row_function
from bsvm_core.solvers import smo
from bsvm_core.solvers.cached_newton import cached_face_newton_step, cached_newton_applies
from bsvm_core.solvers.face_newton import face_newton_step
from bsvm_core.solvers.kernel_cache import DenseKernelRows, KernelRowCache
from bsvm_core.solvers.smo import smo_solve

from .test_smo import clarabel_dual


def moons_kernel(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_moons(n, noise=0.3, random_state=seed)
    X = StandardScaler().fit_transform(X)
    D = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": 0.5})
    K = 1.0 - D
    K = 0.5 * (K + K.T)  # D is symmetric to float32 rounding only
    np.fill_diagonal(K, 1.0)
    return np.ascontiguousarray(K), np.where(y == 1, 1.0, -1.0)


def row_cache(K: np.ndarray, cache_mb: float) -> KernelRowCache:
    return KernelRowCache(lambda i, out: np.copyto(out, K[i]), K.shape[0], cache_mb)


def test_the_step_from_cached_rows_is_the_step_on_d() -> None:
    K, y = moons_kernel(300)
    rng = np.random.default_rng(0)
    free = np.sort(rng.choice(300, 40, replace=False))
    a_F = rng.uniform(0.5, 9.5, 40)
    F_F = rng.normal(size=40)
    D = np.ascontiguousarray(1.0 - K)
    ref = face_newton_step(D[free], free, y[free], a_F, F_F, 10.0)
    ours = cached_face_newton_step(row_cache(K, 1.0), free, y[free], a_F, F_F, 10.0)
    assert ref is not None and ours is not None
    np.testing.assert_allclose(ours[0], ref[0], atol=1e-12)
    assert ours[2] == ref[2]
    # ΔF = −K_{·F} z over every point; on D it is D_{·F} z (eᵀz = 0 on the face)
    z = y[free] * (ours[0] - a_F)
    np.testing.assert_allclose(ours[1], -K[:, free] @ z, atol=1e-10)
    np.testing.assert_allclose(ours[1], ref[1], atol=1e-8)


def test_a_face_past_the_cache_takes_the_same_step_its_rows_computed_again() -> None:
    K, y = moons_kernel(300)
    rng = np.random.default_rng(1)
    free = np.sort(rng.choice(300, 60, replace=False))
    a_F = rng.uniform(0.5, 9.5, 60)
    F_F = rng.normal(size=60)
    whole = row_cache(K, 1.0)
    small = row_cache(K, 300 * 8 * 20 / 2**20)  # 20 rows of a 60-point face
    assert whole.capacity == 300 and small.capacity == 20
    ref = cached_face_newton_step(whole, free, y[free], a_F, F_F, 10.0)
    ours = cached_face_newton_step(small, free, y[free], a_F, F_F, 10.0)
    assert ref is not None and ours is not None
    np.testing.assert_array_equal(ours[0], ref[0])
    np.testing.assert_array_equal(ours[1], ref[1])
    assert whole.n_computed == 60 and small.n_computed == 120  # each row twice


def test_route_only_rbf_rows_on_a_cache() -> None:
    K, _ = moons_kernel(50)
    ones = np.ones(50)
    assert cached_newton_applies(row_cache(K, 1.0), ones, False)
    assert not cached_newton_applies(row_cache(K, 1.0), ones, True)  # floored curvature
    assert not cached_newton_applies(row_cache(K, 1.0), 2.0 * ones, False)  # K_ii ≠ 1
    assert not cached_newton_applies(DenseKernelRows(K), ones, False)


@pytest.mark.parametrize("C", [10.0, 100.0])
def test_newton_on_an_evicting_cache_reaches_the_exact_optimum(C: float) -> None:
    K, y = moons_kernel(400)
    cache = row_cache(K, 400 * 8 * 250 / 2**20)  # 250 of 400 rows: SMO evicts
    ours = smo_solve(None, np.ones(400), y, C, cache=cache, floor_curvature=False, newton=True)
    plain = smo_solve(None, np.ones(400), y, C, cache=row_cache(K, 0.8), floor_curvature=False)
    assert ours.converged and ours.n_iter < plain.n_iter
    alpha = ours.alpha
    assert abs(float(y @ alpha)) < 1e-8 * C and alpha.min() >= 0.0 and alpha.max() <= C
    np.testing.assert_allclose(ours.grad, y - K @ (y * alpha), atol=1e-8 * C)
    assert ours.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-4)


def test_noisy_large_c_past_the_dense_rows_takes_cached_newton_to_the_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n, C = kernel_dual.DENSE_MAX_ROWS + 200, 100.0
    X, y01 = make_classification(n, 8, n_informative=5, flip_y=0.2, random_state=0)
    X = StandardScaler().fit_transform(X)
    assert not kernel_dual.dense_applies(n, "rbf", 200.0) and n < kernel_dual.BATCHED_MIN_ROWS
    steps: list[int] = []
    real = smo.cached_face_newton_step
    monkeypatch.setattr(
        smo, "cached_face_newton_step", lambda *a: steps.append(a[1].size) or real(*a)
    )
    ours = KernelSVM(C=C).fit(X, y01)
    assert len(steps) >= 2 and max(steps) > 100  # faces past 100 points
    # the end point: KKT within tol on F recomputed from the kernel, not SMO's running F
    y = np.where(y01 == 1, 1.0, -1.0)
    gamma = ours._gamma
    row = kernel_row_function(X, "rbf", gamma=gamma)
    coef = np.zeros(n)
    coef[ours.support_] = ours.dual_coef_[0]  # y∘α
    F = y.copy()
    out = np.empty(n)
    for i in np.flatnonzero(coef):
        row(int(i), out)
        F -= coef[i] * out
    alpha = coef * y
    up = ((y > 0) & (alpha < C)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < C))
    assert F[up].max() - F[low].min() < 1.5e-3
    ours_obj = 0.5 * float(alpha @ (y * (y - F))) - alpha.sum()  # ½αᵀQα, Qα = y∘(y − F)
    assert ours.objective_[0] == pytest.approx(ours_obj, rel=1e-6)
    svc = SVC(C=C, gamma=gamma, tol=1e-3).fit(X, y01)
    c, S = svc.dual_coef_[0], svc.support_vectors_
    Ks = np.exp(-gamma * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
    assert ours.objective_[0] <= (0.5 * c @ Ks @ c - np.abs(c).sum()) * (1 - 1e-5)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.99
