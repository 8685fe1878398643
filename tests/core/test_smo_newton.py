"""Face Newton steps in the row-cache SMO (``smo.smo_solve(..., newton=True)`` on a whole rbf D):
the same steps as ``smo_distances``' Newton SMO, the exact optimum (interior point), the free-set
cap, the sets after a step, and that ``kernel_dual`` takes it past ``DOUBLED_MAX_ROWS``."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_moons
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core import KernelSVM, kernel_dual, kernel_matrices
from bsvm_core.solvers import face_newton, smo
from bsvm_core.solvers.face_newton import apply_newton_step
from bsvm_core.solvers.kernel_cache import DenseKernelRows, KernelRowCache
from bsvm_core.solvers.smo import smo_solve
from bsvm_core.solvers.smo_distances import smo_solve_distances

from .test_smo import clarabel_dual


def moons(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_moons(n, noise=0.3, random_state=seed)
    X = StandardScaler().fit_transform(X)
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": 0.5}, doubled=True)
    return X, np.where(y == 1, 1.0, -1.0), W


def on_rows(D: np.ndarray, y: np.ndarray, C: float, **kw: object) -> smo.SMOResult:
    rows = DenseKernelRows(np.ascontiguousarray(D), distances=True)
    return smo_solve(None, np.ones(y.size), y, C, cache=rows, floor_curvature=False, **kw)


def assert_feasible_kkt(ours: Any, K: np.ndarray, y: np.ndarray, C: float) -> None:
    """α in the box with yᵀα = 0, the returned F = y − Kᵀ(y∘α), and m(α) − M(α) < tol (1e-3)."""
    alpha = ours.alpha
    assert abs(float(y @ alpha)) < 1e-8 * C and alpha.min() >= 0.0 and alpha.max() <= C
    np.testing.assert_allclose(ours.grad, y - K.T @ (y * alpha), atol=1e-8 * C)
    up = ((y > 0) & (alpha < C)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < C))
    assert ours.grad[up].max() - ours.grad[low].min() < 1e-3


@pytest.mark.parametrize("C", [1.0, 10.0, 100.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_steps_as_newton_smo_on_doubled_and_the_exact_optimum(C: float, seed: int) -> None:
    _, y, W = moons(240, seed)
    D = W[:, : y.size]
    ours = on_rows(D, y, C, newton=True)
    ref = smo_solve_distances(W, y, C, newton=True)
    plain = on_rows(D, y, C)
    assert ours.converged and ours.n_iter == ref.n_iter
    if C >= 10.0:  # Newton steps converge the free face in fewer iterations
        assert ours.n_iter < plain.n_iter
    np.testing.assert_allclose(ours.alpha, ref.alpha, atol=1e-7 * C)
    assert ours.intercept == pytest.approx(ref.intercept, abs=1e-7)
    K = 1.0 - D
    np.fill_diagonal(K, 1.0)
    assert ours.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-3)
    # the returned F is −y∘∇f at α (Newton steps moved it by ΔF, not recomputed): steps read rows
    # of D, symmetric to float32 rounding only, so F = y − Kᵀ(y∘α)
    assert_feasible_kkt(ours, K, y, C)


def test_no_newton_step_past_the_free_cap_nor_without_distances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, y, W = moons(200)
    D = np.ascontiguousarray(W[:, : y.size])
    plain = on_rows(D, y, 100.0)
    monkeypatch.setattr(smo, "NEWTON_MAX_FREE", 1)
    capped = on_rows(D, y, 100.0, newton=True)
    assert capped.n_iter == plain.n_iter
    np.testing.assert_array_equal(capped.alpha, plain.alpha)
    # kernel values (not distances) and a row cache: ``newton`` is ignored
    K = 1.0 - D
    np.fill_diagonal(K, 1.0)
    monkeypatch.setattr(smo, "NEWTON_MAX_FREE", 10**6)
    for cache in (DenseKernelRows(K), KernelRowCache(lambda i, out: np.copyto(out, K[i]), 200, 1)):
        a = smo_solve(None, np.ones(200), y, 100.0, cache=cache, newton=True)
        b = smo_solve(None, np.ones(200), y, 100.0, cache=DenseKernelRows(K))
        assert a.n_iter == b.n_iter
        np.testing.assert_array_equal(a.alpha, b.alpha)


def test_a_stopped_newton_run_resumes_to_a_solution() -> None:
    _, y, W = moons(200)
    D = W[:, : y.size]
    whole = on_rows(D, y, 10.0, newton=True)
    first = on_rows(D, y, 10.0, newton=True, stop_if=(40, lambda alpha: True))
    assert not first.converged and first.n_iter == 40
    rest = on_rows(D, y, 10.0, newton=True, start=first)
    assert rest.converged
    assert rest.objective == pytest.approx(whole.objective, rel=1e-5)


@pytest.mark.parametrize("y_p", [1.0, -1.0])
def test_sets_after_a_newton_step(y_p: float) -> None:
    inf = math.inf
    C = 2.0
    alpha = [1.0, 1.0, 1.0]
    up, low = np.zeros(3), np.zeros(3)
    step = (np.array([0.0, 0.5, C]), np.zeros(3), 0)
    apply_newton_step(step, alpha, [0, 1, 2], (np.zeros(3),), up, low, [y_p] * 3, C)
    assert alpha == [0.0, 0.5, C]
    # y = +1: I_up is α < C, I_low α > 0; y = −1 the reverse
    at_zero, at_c = (up[0], low[0]), (up[2], low[2])
    assert (up[1], low[1]) == (0.0, 0.0)
    if y_p > 0:
        assert at_zero == (0.0, inf) and at_c == (-inf, 0.0)
    else:
        assert at_zero == (-inf, 0.0) and at_c == (0.0, inf)


@pytest.mark.parametrize("y_p", [1.0, -1.0])
def test_newton_step_on_u_and_l_moves_f_and_sets_as_on_penalties(y_p: float) -> None:
    """``smo_distances``' state (G = [U | L], F inside the sets, y as bytes) after a step: F moves
    by ΔF where finite, ±inf stay, and the sets are those of the penalties' state (``smo``)."""
    inf = math.inf
    C = 2.0
    F = np.array([0.25, -0.5, 1.0, 3.0])
    step = (np.array([0.0, 0.5, C]), np.array([1.0, 2.0, -4.0, 8.0]), 0)
    free = [0, 1, 2]
    G = np.concatenate((F, F))
    G[3], G[7] = -inf, inf  # point 3 outside both sets
    alpha = [1.0, 1.0, 1.0, 0.0]
    U, L = G[:4], G[4:]
    positive = bytes([y_p > 0] * 4)
    apply_newton_step(step, alpha, free, (U, L), U, L, positive, C)
    grad = F.copy()
    up, low = np.zeros(4), np.zeros(4)
    up[3], low[3] = -inf, inf
    alpha_pen = [1.0, 1.0, 1.0, 0.0]
    apply_newton_step(step, alpha_pen, free, (grad,), up, low, [y_p] * 4, C)
    assert alpha == alpha_pen == [0.0, 0.5, C, 0.0]
    assert grad.tolist() == [1.25, 1.5, -3.0, 11.0]
    assert U.tolist() == np.where(up == 0.0, grad, -inf).tolist()
    assert L.tolist() == np.where(low == 0.0, grad, inf).tolist()


@pytest.mark.parametrize("C", [1.0, 10.0, 100.0])
def test_estimator_past_the_doubled_rows_takes_newton_and_meets_libsvm(
    C: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = kernel_dual.DOUBLED_MAX_ROWS + 100
    X, y = make_moons(n, noise=0.3, random_state=0)
    X = StandardScaler().fit_transform(X)
    assert not kernel_dual.doubled_applies(n, 2, "rbf", C, None, 200.0)
    steps = []
    real = smo.face_newton_step
    monkeypatch.setattr(smo, "face_newton_step", lambda *a: steps.append(1) or real(*a))
    ours, svc = KernelSVM(C=C).fit(X, y), SVC(C=C).fit(X, y)
    assert steps
    c = svc.dual_coef_[0]
    S = svc.support_vectors_
    K = np.exp(-ours._gamma * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
    assert ours.objective_[0] == pytest.approx(0.5 * c @ K @ c - np.abs(c).sum(), rel=1e-3)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.995


def noisy(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(D, ±1 targets) of make_classification(n, 8, 5 informative, flip_y=0.2): at large C its
    free face holds 150-200 points."""
    X, y = make_classification(n, 8, n_informative=5, flip_y=0.2, random_state=seed)
    X = StandardScaler().fit_transform(X)
    D = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": 1.0 / 8})
    return np.ascontiguousarray(D), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("C", [100.0, 1000.0])
def test_newton_steps_past_100_free_points_reach_the_exact_optimum(
    C: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a noisy problem at large C, Newton steps on faces of more than 100 free points (the old
    ``NEWTON_MAX_FREE``) are taken; SMO with them meets Clarabel's optimum and KKT within tol, in
    fewer iterations than with the old cap, and to an objective no higher than the old cap's."""
    D, y = noisy(400)
    sizes: list[int] = []
    real = smo.face_newton_step

    def counted(D_F: np.ndarray, free: np.ndarray, *args: object) -> object:
        out = real(D_F, free, *args)
        if out is not None:
            sizes.append(free.size)
        return out

    monkeypatch.setattr(smo, "face_newton_step", counted)
    ours = on_rows(D, y, C, newton=True)
    assert ours.converged and max(sizes) > 100
    K = 1.0 - D
    np.fill_diagonal(K, 1.0)
    best = clarabel_dual(K, y, C)
    assert ours.objective == pytest.approx(best, rel=1e-5)
    assert_feasible_kkt(ours, K, y, C)
    monkeypatch.setattr(smo, "NEWTON_MAX_FREE", 100)
    monkeypatch.setattr(smo, "DENSE_NEWTON_FLOPS_PER_STEP", face_newton.NEWTON_FLOPS_PER_STEP)
    capped = on_rows(D, y, C, newton=True)
    assert capped.converged and ours.n_iter < capped.n_iter / 3
    assert ours.objective <= capped.objective + 1e-6 * abs(capped.objective)


def test_a_newton_step_on_k_points_waits_for_its_cholesky_in_smo_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``smo_solve`` tries a Newton step on k free points (2 ≤ k ≤ ``NEWTON_MAX_FREE``) only after
    ``newton_wait(k, taken, DENSE_NEWTON_FLOPS_PER_STEP)`` SMO steps since the start or the last
    try (twice after a refused one): counted by the rows SMO reads (two a step). Faces of more
    than 100 points (the old cap) get steps, and some come sooner than ``smo_distances``' wait
    (``NEWTON_FLOPS_PER_STEP``) would allow."""
    assert face_newton.newton_wait(150, True, 300_000) == 1 + 150**3 // 300_000
    assert face_newton.newton_wait(150, False, 300_000) == 2 * (1 + 150**3 // 300_000)
    assert face_newton.newton_wait(150, True) == 1 + 150**3 // face_newton.NEWTON_FLOPS_PER_STEP
    D, y = noisy(400)
    rows_read = [0]
    tries: list[tuple[int, int, bool]] = [(0, 0, True)]  # (rows read before, k, taken)
    real_step = smo.face_newton_step

    class Counted(DenseKernelRows):
        def row(self, i: int) -> np.ndarray:
            rows_read[0] += 1
            return super().row(i)

    def step(D_F: np.ndarray, free: np.ndarray, *args: object) -> object:
        out = real_step(D_F, free, *args)
        tries.append((rows_read[0], free.size, out is not None))
        return out

    monkeypatch.setattr(smo, "face_newton_step", step)
    res = smo_solve(
        None,
        np.ones(y.size),
        y,
        1000.0,
        cache=Counted(D, distances=True),
        newton=True,
        floor_curvature=False,
    )
    assert res.converged and len(tries) >= 4 and max(k for _, k, _ in tries) > 100
    sooner = 0
    for (r0, _, taken), (r1, k, _) in itertools.pairwise(tries):
        between = (r1 - r0) // 2  # SMO steps from the last try (or the start) to this one
        wait = face_newton.newton_wait(k, taken, smo.DENSE_NEWTON_FLOPS_PER_STEP)
        assert 2 <= k <= smo.NEWTON_MAX_FREE
        assert between >= wait - 1
        sooner += between < face_newton.newton_wait(k, taken) - 1
    assert sooner >= 1
