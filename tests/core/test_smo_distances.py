"""SMO on [D | D] (``solvers.smo_distances``): the steps of SMO on the distance rows, the exact
optimum (interior point), resuming a stopped run, rows of D^(−1/2) made one at a time, and when
``kernel_dual`` takes it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_moons
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core import KernelSVM, kernel_dual, kernel_matrices
from bsvm_core.solvers import smo_distances
from bsvm_core.solvers.kernel_cache import DenseKernelRows
from bsvm_core.solvers.smo import intercept_rule, smo_solve
from bsvm_core.solvers.smo_distances import smo_solve_distances

from .test_smo import clarabel_dual


def data(n: int = 200, d: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n, d, n_informative=6, flip_y=0.1, random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def doubled(X: np.ndarray, gamma: float) -> np.ndarray:
    return kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)


def test_doubled_matrix_is_d_twice() -> None:
    X, _ = data(90)
    W = doubled(X, 0.05)
    D = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": 0.05})
    assert W.shape == (90, 180)
    np.testing.assert_array_equal(W[:, :90], D)
    np.testing.assert_array_equal(W[:, 90:], D)


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_steps_as_smo_on_distance_rows_and_the_exact_optimum(C: float, seed: int) -> None:
    X, y = data(seed=seed)
    W = doubled(X, 0.05)
    D = np.ascontiguousarray(W[:, : y.size])
    ours = smo_solve_distances(W, y, C)
    ref = smo_solve(
        None, np.ones(y.size), y, C, cache=DenseKernelRows(D, distances=True), floor_curvature=False
    )
    assert ours.converged and ours.n_iter == ref.n_iter
    np.testing.assert_allclose(ours.alpha, ref.alpha, atol=1e-9)
    np.testing.assert_allclose(ours.grad, ref.grad, atol=1e-9)
    assert ours.intercept == pytest.approx(ref.intercept, abs=1e-9)
    K = 1.0 - D
    np.fill_diagonal(K, 1.0)
    assert ours.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-3)
    alpha = ours.alpha
    assert abs(float(y @ alpha)) < 1e-8 and alpha.min() >= 0.0 and alpha.max() <= C
    Q = (y[:, None] * y[None, :]) * K
    assert 0.5 * alpha @ Q @ alpha - alpha.sum() == pytest.approx(ours.objective, rel=1e-9)


def test_a_stopped_run_resumes_to_the_same_solution() -> None:
    X, y = data()
    W = doubled(X, 0.05)
    whole = smo_solve_distances(W, y, 10.0)
    first = smo_solve_distances(W, y, 10.0, stop_if=(25, lambda alpha: True))
    assert not first.converged and first.n_iter == 25
    rest = smo_solve_distances(W, y, 10.0, start=first)
    assert rest.converged and rest.n_iter == whole.n_iter
    np.testing.assert_allclose(rest.alpha, whole.alpha, atol=1e-12)
    capped = smo_solve_distances(W, y, 10.0, max_iter=7)
    assert not capped.converged and capped.n_iter == 7


def test_rows_of_the_inverse_made_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = data()
    W = doubled(X, 0.05)
    whole = smo_solve_distances(W, y, 10.0)
    monkeypatch.setattr(smo_distances, "WHOLE_INVERSE_MAX_ROWS", 0)
    for keep in (None, 0, 5):
        lazy = smo_solve_distances(W, y, 10.0, max_inverse_rows=keep)
        assert lazy.n_iter == whole.n_iter
        np.testing.assert_array_equal(lazy.alpha, whole.alpha)


@pytest.mark.parametrize("newton", [False, True])
@pytest.mark.parametrize("C", [1.0, 10.0])
def test_a_problem_on_some_rows_of_a_larger_matrix(C: float, newton: bool) -> None:
    X, y = data(160)
    W = doubled(X, 0.05)
    inverse: dict[int, np.ndarray] = {}
    for seed in (0, 1):  # two problems on the same W share the rows of D^(-1/2)
        rows = np.sort(np.random.default_rng(seed).choice(160, 110, replace=False))
        W_rows = W[np.ix_(rows, np.concatenate((rows, rows + 160)))]  # the same entries
        alone = smo_solve_distances(W_rows, y[rows], C, newton=newton)
        within = smo_solve_distances(W, y[rows], C, newton=newton, rows=rows, inverse=inverse)
        assert within.converged and within.n_iter == alone.n_iter
        np.testing.assert_allclose(within.alpha, alone.alpha, atol=1e-12)
        np.testing.assert_allclose(within.grad, alone.grad, atol=1e-12)
        assert within.intercept == pytest.approx(alone.intercept, abs=1e-12)
        assert within.objective == pytest.approx(alone.objective, rel=1e-12)
        assert set(inverse) <= set(range(160))
    with pytest.raises(ValueError):
        smo_solve_distances(W, y[rows], C, rows=rows, start=within)


def test_when_the_doubled_path_applies() -> None:
    n = kernel_dual.DOUBLED_MAX_ROWS
    assert kernel_dual.doubled_applies(n, 2, "rbf", 1.0, None, 200.0)
    assert not kernel_dual.doubled_applies(n + 1, 2, "rbf", 1.0, None, 200.0)
    assert not kernel_dual.doubled_applies(n, 2, "rbf", np.inf, None, 200.0)  # hard margin
    assert not kernel_dual.doubled_applies(n, 2, "poly", 1.0, None, 200.0)
    assert not kernel_dual.doubled_applies(n, 2, "rbf", 1.0, None, 16 * n * n / 2**20 - 1)
    # problems that start with the active sets' probe keep smo_solve
    assert kernel_dual.active_sets_apply(300, 10, 1.0, None, "rbf")
    assert not kernel_dual.doubled_applies(300, 10, "rbf", 1.0, None, 200.0)
    assert kernel_dual.doubled_applies(300, 10, "rbf", 1.0, 1000, 200.0)  # max_iter: SMO alone
    assert kernel_dual.doubled_applies(150, 10, "rbf", 1.0, None, 200.0)  # below the probe's rows


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_estimator_takes_it_and_meets_libsvm(C: float, monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = make_moons(300, noise=0.3, random_state=0)
    X = StandardScaler().fit_transform(X)
    calls = []
    real = kernel_dual.smo_solve_distances
    monkeypatch.setattr(
        kernel_dual, "smo_solve_distances", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    ours, svc = KernelSVM(C=C).fit(X, y), SVC(C=C).fit(X, y)
    assert calls
    c = svc.dual_coef_[0]
    S = svc.support_vectors_
    K = np.exp(-ours._gamma * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
    assert ours.objective_[0] == pytest.approx(0.5 * c @ K @ c - np.abs(c).sum(), rel=1e-3)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.995


@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("C", [0.1, 1.0, 100.0])
def test_intercept_objective_and_grad_are_the_rules_on_the_result(C: float, rows: bool) -> None:
    # the solver's intercept (over U >= L), objective and F are smo's rules on its own alpha, to
    # the bit; F is -y∘∇f of alpha (recomputed from K, to rounding)
    X, y = data(150, seed=2)
    W = doubled(X, 0.1)
    picked = np.sort(np.random.default_rng(3).choice(150, 100, replace=False)) if rows else None
    y_p = y[picked] if rows else y
    for newton in (False, True):
        res = smo_solve_distances(W, y_p, C, newton=newton, rows=picked)
        assert res.converged
        assert res.intercept == intercept_rule(res.alpha, res.grad, y_p, C)
        assert res.objective == 0.5 * float(np.dot(res.alpha, -y_p * res.grad - 1.0))
        D = W[:, :150] if picked is None else W[np.ix_(picked, picked)]
        K = 1.0 - D
        np.fill_diagonal(K, 1.0)
        # D's entries are symmetric to float32 rounding only: F's rows against K's columns
        tol = 1e-6 * (1.0 + res.alpha.sum())
        np.testing.assert_allclose(res.grad, y_p - K @ (y_p * res.alpha), atol=tol)
        free = (res.alpha > 0.0) & (res.alpha < C)
        assert free.any() or C < 1.0  # the free points' rule is met (C = 0.1: one case has none)


def test_newton_steps_start_from_the_free_alphas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each face Newton step gets α_F as an aligned float64 array holding, in the free points'
    order, the α that the solver holds for them (the list it writes back to), and its F_F."""
    X, y = data(200)
    W = doubled(X, 0.05)
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    real = smo_distances.face_newton_step

    def spy(D_F, free, y_F, a_F, F_F, C):
        assert a_F.dtype == np.float64 and a_F.flags.aligned and a_F.flags.c_contiguous
        seen.append((free.copy(), a_F.copy(), F_F.copy()))
        return real(D_F, free, y_F, a_F, F_F, C)

    monkeypatch.setattr(smo_distances, "face_newton_step", spy)
    res = smo_solve_distances(W, y, 10.0, newton=True)
    assert res.converged and len(seen) >= 2
    for free, a_F, F_F in seen:
        assert np.all((a_F > 0.0) & (a_F < 10.0))  # free points only
        assert a_F.size == free.size == F_F.size
    # the first step's α_F and F_F are those of a run stopped just before it
    first_free, first_a, first_F = seen[0]
    monkeypatch.setattr(smo_distances, "face_newton_step", real)
    for n_iter in range(1, res.n_iter):
        before = smo_solve_distances(W, y, 10.0, newton=True, stop_if=(n_iter, lambda a: True))
        free = np.flatnonzero((before.alpha > 0.0) & (before.alpha < 10.0))
        if np.array_equal(free, first_free) and np.array_equal(before.alpha[free], first_a):
            np.testing.assert_allclose(before.grad[free], first_F, rtol=0, atol=1e-12)
            return
    pytest.fail("no stopped run holds the first Newton step's α_F")
