"""EM and ECME against independent optimisers of the same objective (bayes-svm.md §4, §5, §11)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog, minimize, minimize_scalar
from sklearn.datasets import load_breast_cancer
from sklearn.svm import SVC

from bsvm_core.solvers.bayes_ecme import fit_ecme, tau_mode
from bsvm_core.solvers.bayes_em import fit_em


def _problem(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping two-class Gaussian data → (Xt with intercept column first, penalised mask)."""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.standard_normal((n, d)) + 0.8 * y[:, None] * np.linspace(1.0, 0.0, d)
    X = (X - X.mean(0)) / X.std(0)
    Z = np.column_stack([np.ones(n), X])
    return y[:, None] * Z, np.r_[False, np.ones(d, dtype=bool)]


def _objective(Xt: np.ndarray, beta: np.ndarray, c: float, alpha: float, pen: np.ndarray) -> float:
    """Σ hinge + c Σ|β_pen|^α, written out independently of the library."""
    return float(np.maximum(0.0, 1.0 - Xt @ beta).sum() + c * np.sum(np.abs(beta[pen]) ** alpha))


def _lp_lasso_svm(Xt: np.ndarray, pen: np.ndarray, c: float) -> tuple[float, np.ndarray]:
    """min Σ ξ + c Σ (u+v), ξ ≥ 1 − Xt(u−v), by HiGHS; returns (optimum, β)."""
    n, k = Xt.shape
    cost = np.r_[np.where(pen, c, 0.0), np.where(pen, c, 0.0), np.ones(n)]
    A = np.hstack([-Xt, Xt, -np.eye(n)])
    res = linprog(cost, A_ub=A, b_ub=-np.ones(n), bounds=(0, None), method="highs")
    assert res.status == 0
    return float(res.fun), res.x[:k] - res.x[k : 2 * k]


@pytest.mark.parametrize(("nu", "seed"), [(0.5, 0), (2.0, 1), (1.0, 2)])
def test_em_alpha1_matches_lp_optimum(nu: float, seed: int) -> None:
    Xt, pen = _problem(80, 4, seed)
    # the augmented model with nu has its mode at argmin d_1(., 2 nu): penalty weight 1 / (2 nu)
    ref, _ = _lp_lasso_svm(Xt, pen, 0.5 / nu)
    res = fit_em(Xt, alpha=1.0, nu=nu, penalised=pen, tol=1e-10, max_iter=50000)
    ours = _objective(Xt, res.beta, 0.5 / nu, 1.0, pen)
    assert res.converged
    assert ours == pytest.approx(res.objective, rel=1e-12)
    assert (ours - ref) / ref <= 1e-6
    assert ours >= ref - 1e-9 * ref  # a feasible point cannot beat the LP optimum


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_em_alpha2_nu_sqrt_c_matches_svc(C: float) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    ypm = np.where(y == 1, 1.0, -1.0)
    Xt = ypm[:, None] * np.column_stack([np.ones(len(X)), X])
    pen = np.r_[False, np.ones(X.shape[1], dtype=bool)]
    res = fit_em(Xt, alpha=2.0, nu=np.sqrt(C), penalised=pen, tol=1e-12, max_iter=50000)
    svc = SVC(kernel="linear", C=C, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(res.beta[1:], svc.coef_.ravel(), atol=1e-4)
    assert res.beta[0] == pytest.approx(svc.intercept_[0], abs=1e-4)


def test_em_alpha15_matches_slsqp() -> None:
    Xt, pen = _problem(40, 3, 3)
    n, k = Xt.shape
    nu = 1.0
    c = 0.5 * nu**-1.5

    # smooth reformulation: min Σ ξ + c Σ|β|^1.5 s.t. ξ ≥ 1 − Xt β, ξ ≥ 0  (|β|^1.5 is C¹)
    def fun(z: np.ndarray) -> float:
        return float(z[k:].sum() + c * np.sum(np.abs(z[:k][pen]) ** 1.5))

    def grad(z: np.ndarray) -> np.ndarray:
        g = np.r_[np.zeros(k), np.ones(n)]
        b = z[:k]
        g[:k][pen] = 1.5 * c * np.sign(b[pen]) * np.sqrt(np.abs(b[pen]))
        return g

    cons = [
        {"type": "ineq", "fun": lambda z: z[k:] - 1.0 + Xt @ z[:k],
         "jac": lambda z: np.hstack([Xt, np.eye(n)])},
        {"type": "ineq", "fun": lambda z: z[k:], "jac": lambda z: np.hstack([np.zeros((n, k)), np.eye(n)])},
    ]  # fmt: skip
    z0 = np.r_[np.full(k, 0.1), np.ones(n) * 2.0]
    ref = minimize(fun, z0, jac=grad, constraints=cons, method="SLSQP",
                   options={"ftol": 1e-12, "maxiter": 2000})  # fmt: skip
    ref_obj = _objective(Xt, ref.x[:k], c, 1.5, pen)
    assert ref.fun == pytest.approx(ref_obj, rel=1e-6)  # the reference ended feasible
    res = fit_em(Xt, alpha=1.5, nu=nu, penalised=pen, tol=1e-12, max_iter=50000)
    ours = _objective(Xt, res.beta, c, 1.5, pen)
    assert ours <= ref_obj * (1 + 1e-6)
    assert ours >= ref_obj * (1 - 1e-5)  # and they agree: neither solver is far off
    np.testing.assert_allclose(res.beta, ref.x[:k], atol=2e-3)


def test_em_never_returns_nan_and_starts_off_zero() -> None:
    Xt, pen = _problem(30, 6, 4)  # some coefficients are truly zero under the lasso prior
    res = fit_em(Xt, alpha=0.7, nu=0.5, penalised=pen, tol=1e-8, max_iter=3000)
    assert np.all(np.isfinite(res.beta))
    assert np.isfinite(res.objective)


def test_ecme_update_is_not_inverted() -> None:
    # tau = nu^-alpha = (k/alpha + a - 1) / (b + S): more shrinkage when S is small
    assert tau_mode(2.0, 1.0, 4, 1.0, 1.0) == pytest.approx(4.0 / 3.0)
    assert tau_mode(0.1, 2.0, 4, 2.0, 0.5) == pytest.approx(3.0 / 0.6)


@pytest.mark.slow
def test_ecme_fixed_point_matches_profile_grid_search() -> None:
    Xt, pen = _problem(60, 3, 5)
    k, a_nu, b_nu, alpha = int(pen.sum()), 1.0, 1.0, 1.0
    shape = k / alpha + a_nu - 1.0

    def profile(log_tau: float) -> float:
        """min over β of 2 Σ hinge + τ S, by LP, plus the τ terms of minus the log posterior."""
        tau = np.exp(log_tau)
        lp, _ = _lp_lasso_svm(Xt, pen, tau / 2.0)
        return 2.0 * lp + b_nu * tau - shape * log_tau

    grid = np.linspace(-4.0, 3.0, 71)
    best = grid[np.argmin([profile(t) for t in grid])]
    opt = minimize_scalar(profile, bounds=(best - 0.1, best + 0.1), method="bounded",
                          options={"xatol": 1e-7})  # fmt: skip
    res = fit_ecme(Xt, alpha=alpha, a_nu=a_nu, b_nu=b_nu, penalised=pen, tol=1e-12, max_iter=50000)
    tau_ecme = res.nu**-alpha
    assert np.log(tau_ecme) == pytest.approx(opt.x, abs=2e-3)
    assert profile(np.log(tau_ecme)) == pytest.approx(opt.fun, rel=1e-6, abs=1e-6)
