"""The exact linear solver's large-data paths (subsample warm start, reduced problems) and pieces."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from sklearn.datasets import make_classification

from bsvm_core.solvers import linear_exact
from bsvm_core.solvers.linear_active_set import solve_partition
from bsvm_core.solvers.linear_objective import optimal_intercept, primal_objective
from bsvm_core.solvers.linear_smooth import exact_line_search

from .test_linear_svm import clarabel_svm


@pytest.fixture(scope="module")
def noisy() -> tuple[np.ndarray, np.ndarray]:
    X, y01 = make_classification(
        n_samples=3000, n_features=8, n_informative=5, flip_y=0.05, random_state=4
    )
    return X, np.where(y01 == 1, 1.0, -1.0)


@pytest.mark.parametrize(("C", "fit_intercept"), [(0.05, True), (1.0, True), (20.0, False)])
def test_warm_start_and_reduced_problems_reach_the_qp_optimum(
    noisy, monkeypatch, C: float, fit_intercept: bool
) -> None:
    X, y = noisy
    monkeypatch.setattr(linear_exact, "WARM_ROWS", 1000)  # subsample warm start at this size too
    calls = {"_reduced": 0, "warm_start_rows": 0}

    def spy(name: str):  # type: ignore[no-untyped-def]
        real = getattr(linear_exact, name)

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(linear_exact, name, counted)

    spy("_reduced")
    spy("warm_start_rows")
    sol = linear_exact.fit_linear_exact(X, y, C, fit_intercept)
    assert calls["_reduced"] >= 1 and calls["warm_start_rows"] == 1
    assert sol.converged
    ref = clarabel_svm(X, y, C, fit_intercept)
    assert primal_objective(X, y, sol.w, sol.b, C) == pytest.approx(ref, rel=1e-8)
    assert sol.objective == pytest.approx(ref, rel=1e-8)
    if not fit_intercept:
        assert sol.b == 0.0


def test_warm_start_survives_a_subsample_with_one_class(monkeypatch) -> None:
    rng = np.random.default_rng(6)
    X = rng.normal(size=(2500, 4))
    y = -np.ones(2500)
    positives = np.setdiff1d(np.arange(2500), linear_exact.warm_start_rows(2500))[:4]
    y[positives] = 1.0  # four positives, none of them in the subsample
    X[positives] += 1.5
    monkeypatch.setattr(linear_exact, "WARM_ROWS", 1000)
    for C in (0.1, 10.0):
        sol = linear_exact.fit_linear_exact(X, y, C)
        assert sol.converged
        assert sol.objective == pytest.approx(clarabel_svm(X, y, C), rel=1e-8)


def test_reduced_problem_grows_until_every_row_meets_kkt(noisy, monkeypatch) -> None:
    X, y = noisy
    C = 1.0
    exact = linear_exact.fit_linear_exact(X, y, C)
    w = exact.w + 0.2 * np.random.default_rng(0).normal(size=X.shape[1])  # a poor guess ...
    z = 1.0 - y * (X @ w + exact.b)
    rows = np.abs(z) < 0.05  # ... and a narrow band: many outside rows are on the wrong side
    sizes: list[int] = []
    continuation = linear_exact._continuation

    def spy(problem, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(problem.X.shape[0])
        return continuation(problem, *args, **kwargs)

    monkeypatch.setattr(linear_exact, "_continuation", spy)
    problem = linear_exact._Problem(X, y, C, True, 1e-4)
    fit = linear_exact._reduced(problem, 1000, w, exact.b, 0.1, rows, z)
    assert sizes[0] == np.count_nonzero(rows)
    assert len(sizes) >= 2 and sizes == sorted(sizes)  # the band had to grow
    assert fit.converged and fit.alpha is not None
    ref = clarabel_svm(X, y, C)
    assert primal_objective(X, y, fit.w, fit.b, C) == pytest.approx(ref, rel=1e-8)
    assert np.all((fit.alpha >= 0.0) & (fit.alpha <= C))
    assert float(fit.alpha @ y) == pytest.approx(0.0, abs=1e-8 * C * X.shape[0])
    np.testing.assert_allclose(fit.w, X.T @ (fit.alpha * y), atol=1e-8)


def test_reduced_paths_do_not_change_the_solution(noisy, monkeypatch) -> None:
    X, y = noisy
    fast = linear_exact.fit_linear_exact(X, y, 1.0)
    monkeypatch.setattr(linear_exact, "SHRINK_MIN_ROWS", 10**9)
    plain = linear_exact.fit_linear_exact(X, y, 1.0)
    np.testing.assert_allclose(fast.w, plain.w, atol=1e-9)
    assert fast.b == pytest.approx(plain.b, abs=1e-9)


def _along(t: float, w, dw, z, dm, lin_step: float, C: float, mu: float) -> float:  # type: ignore[no-untyped-def]
    """F_μ(w + t·dw) − t·lin_step with z_i − t·dm_i in the Huber-smoothed hinge, by definition."""
    zt = z - t * dm
    h = np.where(zt >= mu, zt - 0.5 * mu, np.where(zt > 0.0, zt * zt / (2 * mu), 0.0))
    return 0.5 * float((w + t * dw) @ (w + t * dw)) - t * lin_step + C * float(h.sum())


def test_line_search_minimises_along_the_direction() -> None:
    rng = np.random.default_rng(5)
    n, d, C, mu = 400, 6, 2.0, 0.3
    for _ in range(20):
        w, dw = rng.normal(size=d), rng.normal(size=d)
        z, dm = rng.normal(size=n), rng.normal(size=n)
        lin_step = float(rng.normal())
        slope0 = float(w @ dw) - lin_step - C * float(np.clip(z / mu, 0.0, 1.0) @ dm)
        if slope0 >= 0.0:  # the search assumes a descent direction
            dw, dm, lin_step = -dw, -dm, -lin_step
        args = (w, dw, z, dm, lin_step, C, mu)
        t = exact_line_search(w, dw, z, dm, C, mu, lin_step)
        ref = minimize_scalar(
            _along, bounds=(0.0, 50.0), args=args, method="bounded", options={"xatol": 1e-12}
        )
        assert _along(t, *args) <= ref.fun + 1e-9 * max(1.0, abs(ref.fun))


def test_optimal_intercept_with_shift_is_the_minimiser() -> None:
    rng = np.random.default_rng(2)
    s, y = rng.normal(size=80), np.where(rng.random(80) < 0.5, 1.0, -1.0)
    for shift in (-7.0, -1.0, 3.0):
        b = optimal_intercept(s, y, shift)
        f = lambda c: np.maximum(0.0, 1.0 - y * (s + c)).sum() - shift * c  # noqa: E731,B023
        grid = np.linspace(b - 4.0, b + 4.0, 8001)
        assert f(b) <= min(f(c) for c in grid) + 1e-12


def test_fixed_rows_as_a_linear_term_give_the_same_partition_solution() -> None:
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(60, 4)), np.where(rng.random(60) < 0.5, 1.0, -1.0)
    state = np.where(rng.random(60) < 0.5, 0, 2)  # R or L ...
    state[:3] = 1  # ... and three free rows: a consistent, nonsingular KKT system in 4 features
    C = 0.7
    w, b, alpha = solve_partition(X, y, C, state, True)
    out = np.arange(60) >= 40  # rows 40.. leave the problem; those at C become the linear term
    at_c = out & (state == 2)
    lin = C * np.append(X[at_c].T @ y[at_c], y[at_c].sum())
    w2, b2, alpha2 = solve_partition(X[~out], y[~out], C, state[~out], True, lin)
    np.testing.assert_allclose(w2, w, atol=1e-10)
    assert b2 == pytest.approx(b, abs=1e-10)
    np.testing.assert_allclose(alpha2, alpha[~out], atol=1e-10)
