"""Face Newton steps inside batched SMO's subproblems (``batched_smo.solve_subproblem``, ``newton``):
none while subproblems converge the usual way (C = 1: the same bits), and at large C on a noisy set
of ≥ 8,000 rows an end point that meets the KKT conditions with F from scratch and libsvm's
objective and labels."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_moons
from sklearn.svm import SVC

from bsvm_core.kernels import kernel_block_function, kernel_diagonal
from bsvm_core.solvers import batched_smo
from bsvm_core.solvers.batched_smo import batched_smo_solve, up_low_masks


def solve(
    X: np.ndarray, y: np.ndarray, C: float, gamma: float, newton: bool, dtype: type
) -> object:
    return batched_smo_solve(
        kernel_block_function(X, "rbf", gamma=gamma, dtype=dtype),
        kernel_diagonal(X, "rbf", gamma=gamma),
        y,
        C,
        dtype=dtype,
        newton=newton,
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


def test_large_c_noisy_end_point_meets_kkt_and_libsvm(newton_sizes: list[int]) -> None:
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
    svc = SVC(C=C, gamma=gamma).fit(X, y01)
    c = svc.dual_coef_[0]
    S = svc.support_vectors_
    sk_objective = 0.5 * float(c @ kernel_times(S, gamma, S, c)) - float(np.abs(c).sum())
    assert objective <= sk_objective + 1e-6 * abs(sk_objective)
    labels = np.where(Kc + res.intercept > 0, 1, 0)
    assert np.mean(labels == svc.predict(X)) >= 0.999
