"""Face Newton steps inside batched SMO's subproblems (``batched_smo.solve_subproblem``, ``newton``):
none while subproblems converge the usual way (C = 1: the same bits), and at large C on a noisy set
of ≥ 8,000 rows an end point that meets the KKT conditions with F from scratch and libsvm's
objective and labels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_moons
from sklearn.svm import SVC

from bsvm_core.kernels import kernel_block_function, kernel_diagonal
from bsvm_core.solvers import batched_smo
from bsvm_core.solvers.batched_smo import batched_smo_solve, up_low_masks


def solve(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    gamma: float,
    newton: bool,
    dtype: type,
    exact: bool = False,
) -> object:
    return batched_smo_solve(
        kernel_block_function(X, "rbf", gamma=gamma, dtype=dtype),
        kernel_diagonal(X, "rbf", gamma=gamma),
        y,
        C,
        dtype=dtype,
        newton=newton,
        exact_block=kernel_block_function(X, "rbf", gamma=gamma, dtype=np.float64)
        if exact
        else None,
    )


def kernel_times(X: np.ndarray, gamma: float, S: np.ndarray, c: np.ndarray) -> np.ndarray:
    """K(X, S) c in float64, by blocks of 1,000 rows (no n × n matrix)."""
    out = np.empty(X.shape[0])
    sq_s = (S * S).sum(1)
    for start in range(0, X.shape[0], 1000):
        R = X[start : start + 1000]
        d2 = (R * R).sum(1)[:, None] + sq_s[None, :] - 2.0 * R @ S.T
        out[start : start + 1000] = np.exp(-gamma * np.maximum(d2, 0.0)) @ c
    return out


@pytest.fixture
def newton_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The free-set sizes of the face Newton steps batched SMO tries."""
    sizes: list[int] = []
    real = batched_smo.face_newton_step

    def counted(D_F: np.ndarray, free: np.ndarray, *rest: object) -> object:
        sizes.append(free.size)
        return real(D_F, free, *rest)

    monkeypatch.setattr(batched_smo, "face_newton_step", counted)
    return sizes


def test_no_newton_step_at_c_1_keeps_the_bits(newton_sizes: list[int]) -> None:
    X, y = make_classification(8000, 8, n_informative=5, flip_y=0.2, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    y = 2.0 * y - 1.0
    on = solve(X, y, 1.0, 1.0 / 8, True, np.float32)
    assert newton_sizes == []
    off = solve(X, y, 1.0, 1.0 / 8, False, np.float32)
    assert np.array_equal(on.alpha, off.alpha)
    assert on.n_iter == off.n_iter and on.objective == off.objective
    assert on.intercept == off.intercept


@pytest.fixture(scope="module")
def moons_svc() -> tuple[SVC, float]:
    """libsvm on moons(8,000, noise 0.3) at C = 1,000, γ = 0.5, and its dual objective in float64."""
    X, y01 = make_moons(8000, noise=0.3, random_state=0)
    svc = SVC(C=1000.0, gamma=0.5).fit(X, y01)
    c = svc.dual_coef_[0]
    S = svc.support_vectors_
    return svc, 0.5 * float(c @ kernel_times(S, 0.5, S, c)) - float(np.abs(c).sum())


def exact_end_point(
    X: np.ndarray, y: np.ndarray, a: np.ndarray, gamma: float, C: float
) -> tuple[float, float]:
    """(½(y∘α)ᵀK(y∘α) − Σα, m − M) with F = y − K(y∘α) from scratch in float64."""
    sv = np.flatnonzero(a)
    Kc = kernel_times(X, gamma, X[sv], a[sv] * y[sv])
    F = y - Kc
    up, low = up_low_masks(a, y, C)
    return 0.5 * float((a * y) @ Kc) - float(a.sum()), float(F[up].max() - F[low].min())


def test_large_c_noisy_end_point_meets_kkt_and_libsvm(
    newton_sizes: list[int], moons_svc: tuple[SVC, float]
) -> None:
    """moons(8,000, noise 0.3) at C = 1,000: Newton steps taken; the end point's KKT gap from an
    exact F below tol, its objective no worse than libsvm's, and the same training labels."""
    X, y01 = make_moons(8000, noise=0.3, random_state=0)
    y = 2.0 * y01 - 1.0
    C, gamma, tol = 1000.0, 0.5, 1e-3
    res = solve(X, y, C, gamma, True, np.float64)
    assert newton_sizes and res.converged
    a = res.alpha
    assert np.all(a >= 0.0) and np.all(a <= C)
    assert abs(float(a @ y)) < 1e-9 * float(a.sum())
    sv = np.flatnonzero(a)
    Kc = kernel_times(X, gamma, X[sv], a[sv] * y[sv])
    F = y - Kc  # −y∘∇f from scratch
    up, low = up_low_masks(a, y, C)
    assert F[up].max() - F[low].min() < tol * (1 + 1e-6)
    objective = 0.5 * float((a * y) @ Kc) - float(a.sum())
    assert res.objective == pytest.approx(objective, rel=1e-9)
    svc, sk_objective = moons_svc
    assert objective <= sk_objective + 1e-6 * abs(sk_objective)
    labels = np.where(Kc + res.intercept > 0, 1, 0)
    assert np.mean(labels == svc.predict(X)) >= 0.999


def test_float32_end_point_failing_the_exact_check_is_polished(
    checked_gaps: list[float], moons_svc: tuple[SVC, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """moons(8,000, noise 0.3) at C = 1,000 on float32 rows: the end point's gap from an exact F is
    far above tol (the rows' drift); with the float64 block (F refreshed during the solve, then
    the end point checked, ≥ tol, and polished on float64 rows) an exact gap below tol, a lower
    objective, and no worse than libsvm's."""
    X, y01 = make_moons(8000, noise=0.3, random_state=0)
    y = 2.0 * y01 - 1.0
    C, gamma, tol = 1000.0, 0.5, 1e-3
    rough = solve(X, y, C, gamma, True, np.float32)
    rough_objective, rough_gap = exact_end_point(X, y, rough.alpha, gamma, C)
    assert rough.converged and rough_gap > 10 * tol and checked_gaps == []
    shrinks: list[bool] = []
    real = batched_smo.solve_batches

    def spy(*args: Any) -> Any:
        shrinks.append(bool(args[11]))  # (block, …, max_iter, floor_curvature, shrinking, …)
        return real(*args)

    monkeypatch.setattr(batched_smo, "solve_batches", spy)
    res = solve(X, y, C, gamma, True, np.float32, exact=True)
    assert len(checked_gaps) == 1 and checked_gaps[0] >= tol  # refreshed F: nearer, still ≥ tol
    # the float32 solve, then the polish, which shrinks since it starts ≥ 2 tol away
    assert shrinks == [True, True] and checked_gaps[0] >= 2 * tol
    assert res.converged and res.n_iter > rough.n_iter
    a = res.alpha
    assert np.all(a >= 0.0) and np.all(a <= C)
    assert abs(float(a @ y)) < 1e-9 * float(a.sum())
    objective, gap = exact_end_point(X, y, a, gamma, C)
    assert gap < tol
    assert res.objective == pytest.approx(objective, rel=1e-9)
    assert objective < rough_objective
    svc, sk_objective = moons_svc
    assert objective <= sk_objective + 1e-6 * abs(sk_objective)
    sv = np.flatnonzero(a)
    labels = np.where(kernel_times(X, gamma, X[sv], a[sv] * y[sv]) + res.intercept > 0, 1, 0)
    assert np.mean(labels == svc.predict(X)) >= 0.999


def test_short_float32_solve_is_not_checked_and_keeps_its_bits(
    checked_gaps: list[float],
) -> None:
    """make_classification(8,000, 8) at C = 1: fewer rows than ``CHECK_ROWS_PER_SUPPORT_VECTOR``
    a support vector, so no refresh and no check: α, the steps, the intercept and the objective
    are the float32 solve's to the bit; its exact gap is below tol all the same."""
    X, y01 = make_classification(
        8000, 8, n_informative=5, n_redundant=2, flip_y=0.0, random_state=0
    )
    X = (X - X.mean(0)) / X.std(0)
    y = 2.0 * y01 - 1.0
    C, gamma, tol = 1.0, 1.0 / 8, 1e-3
    rough = solve(X, y, C, gamma, True, np.float32)
    res = solve(X, y, C, gamma, True, np.float32, exact=True)
    assert checked_gaps == [] and res.n_kernel_rows < 8 * np.count_nonzero(res.alpha)
    assert np.array_equal(res.alpha, rough.alpha)
    assert res.n_iter == rough.n_iter and res.converged
    assert res.intercept == rough.intercept and res.objective == rough.objective
    objective, gap = exact_end_point(X, y, res.alpha, gamma, C)
    assert gap < tol
    assert res.objective == pytest.approx(objective, rel=1e-6)  # the float32 F's drift
