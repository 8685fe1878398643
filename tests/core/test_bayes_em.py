"""EM and ECME against independent optimisers of the same objective (bayes-svm.md §4, §5, §11)."""

from __future__ import annotations

import clarabel
import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog, minimize, minimize_scalar
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.svm import SVC

from bsvm_core.solvers.bayes_ecme import NU_TOL, ecme_value, fit_ecme, tau_mode
from bsvm_core.solvers.bayes_em import (
    anderson_step,
    em_update,
    fit_em,
    huberised_objective,
    prior_precision,
)
from bsvm_core.solvers.bayes_em_finish import certified_mode


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


def _standardised(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows y_i (1, z_i) with z standardised (constant columns kept), and the penalised mask."""
    sd = X.std(0)
    Z = np.column_stack([np.ones(len(X)), (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)])
    return np.where(y == 1, 1.0, -1.0)[:, None] * Z, np.r_[False, np.ones(X.shape[1], dtype=bool)]


def _qp_ridge_svm(Xt: np.ndarray, pen: np.ndarray, c: float) -> float:
    """min Σ ξ + c ‖β_pen‖², ξ ≥ 1 − Xt β, ξ ≥ 0, by Clarabel (interior point); the optimum."""
    n, k = Xt.shape
    P = sparse.diags(np.r_[np.where(pen, 2.0 * c, 0.0), np.zeros(n)]).tocsc()
    eye = sparse.identity(n, format="csc")
    A = sparse.bmat([[sparse.csc_matrix(-Xt), -eye], [None, -eye]], format="csc")
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    cone = [clarabel.NonnegativeConeT(2 * n)]
    q, b = np.r_[np.zeros(k), np.ones(n)], np.r_[-np.ones(n), np.zeros(n)]
    sol = clarabel.DefaultSolver(P, q, A, b, cone, settings).solve()
    assert str(sol.status) == "Solved"
    return float(sol.obj_val)


def _lp_lasso_svm(Xt: np.ndarray, pen: np.ndarray, c: float) -> tuple[float, np.ndarray]:
    """min Σ ξ + c Σ (u+v), ξ ≥ 1 − Xt(u−v), by HiGHS; returns (optimum, β)."""
    n, k = Xt.shape
    cost = np.r_[np.where(pen, c, 0.0), np.where(pen, c, 0.0), np.ones(n)]
    A = sparse.hstack([sparse.csr_matrix(-Xt), sparse.csr_matrix(Xt), -sparse.identity(n)])
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


@pytest.mark.parametrize("nu", [0.3, 3.0])
def test_em_alpha2_is_certified_optimum_of_qp(nu: float) -> None:
    # redundant features make the design rank-deficient; n is large enough for the working set
    X, y = make_classification(n_samples=3000, n_features=20, random_state=0)
    Xt, pen = _standardised(X, y)
    ref = _qp_ridge_svm(Xt, pen, 0.5 * nu**-2.0)
    res = fit_em(Xt, alpha=2.0, nu=nu, penalised=pen, tol=1e-8)
    ours = _objective(Xt, res.beta, 0.5 * nu**-2.0, 2.0, pen)
    assert res.polished and res.converged
    assert ours == pytest.approx(res.objective, rel=1e-12)
    assert abs(ours - ref) <= 1e-9 * ref
    assert res.n_iter <= 60  # with the finish; EM alone needs 40-120 steps here


@pytest.mark.parametrize("nu", [0.5, 2.0])
def test_em_alpha1_is_certified_optimum_of_lp(nu: float) -> None:
    X, y = make_classification(n_samples=2000, n_features=10, random_state=1)
    Xt, pen = _standardised(X, y)
    ref, _ = _lp_lasso_svm(Xt, pen, 0.5 / nu)
    res = fit_em(Xt, alpha=1.0, nu=nu, penalised=pen, tol=1e-8)
    ours = _objective(Xt, res.beta, 0.5 / nu, 1.0, pen)
    assert res.polished
    assert abs(ours - ref) <= 1e-9 * ref


def test_em_certified_with_tied_rows() -> None:
    # binary features: many identical rows sit on the margin together (a degenerate face)
    rng = np.random.default_rng(7)
    X = rng.integers(0, 2, (2000, 10)).astype(float)
    y = (X[:, :3].sum(1) + rng.integers(0, 2, 2000) > 2).astype(int)
    Xt, pen = _standardised(X, y)
    for alpha, ref in ((2.0, _qp_ridge_svm(Xt, pen, 0.5)), (1.0, _lp_lasso_svm(Xt, pen, 0.5)[0])):
        res = fit_em(Xt, alpha=alpha, nu=1.0, penalised=pen, tol=1e-8)
        ours = _objective(Xt, res.beta, 0.5, alpha, pen)
        assert ours >= ref * (1 - 1e-9)  # no false certificate below the optimum
        assert ours <= ref * (1 + (1e-9 if res.polished else 1e-6))


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_finish_is_none_or_the_optimum(alpha: float) -> None:
    # from random points and from early EM iterates: never a false certificate
    X, y = make_classification(n_samples=3000, n_features=20, random_state=2)
    Xt, pen = _standardised(X, y)
    ref = _qp_ridge_svm(Xt, pen, 0.5) if alpha == 2.0 else _lp_lasso_svm(Xt, pen, 0.5)[0]
    rng = np.random.default_rng(0)
    starts = [rng.standard_normal(Xt.shape[1]) for _ in range(3)]
    starts += [
        fit_em(Xt, alpha=alpha, penalised=pen, max_iter=m, finish=False).beta for m in (1, 3, 6)
    ]
    certified = 0
    for beta in starts:
        exact = certified_mode(Xt, beta, alpha, 1.0, pen)
        if exact is not None:
            certified += 1
            assert _objective(Xt, exact, 0.5, alpha, pen) == pytest.approx(ref, rel=1e-9)
    assert certified >= 1


@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0])
@pytest.mark.parametrize("eps", [1e-1, 1e-4])
def test_em_step_decreases_the_huberised_objective(alpha: float, eps: float) -> None:
    # the safeguard of the Anderson steps relies on this MM property (bayes-svm.md §4)
    Xt, pen = _problem(200, 5, 6)
    rng = np.random.default_rng(1)
    for _ in range(5):
        beta = rng.standard_normal(Xt.shape[1])
        new = em_update(Xt, 1.0 - Xt @ beta, prior_precision(beta, alpha, 1.0, pen), eps)
        before = huberised_objective(1.0 - Xt @ beta, beta, alpha, 1.0, pen, eps)
        after = huberised_objective(1.0 - Xt @ new, new, alpha, 1.0, pen, eps)
        assert after <= before + 1e-12 * abs(before)


def test_anderson_step_solves_an_affine_fixed_point() -> None:
    # for g(x) = Mx + b in R^d, d + 1 pairs (x_i, g(x_i)) give the fixed point exactly
    rng = np.random.default_rng(3)
    d = 4
    M = 0.9 * np.linalg.qr(rng.standard_normal((d, d)))[0]
    b = rng.standard_normal(d)
    history, x = [], rng.standard_normal(d)
    for _ in range(d + 1):
        history.append((x, M @ x + b))
        x = M @ x + b
    fixed = np.linalg.solve(np.eye(d) - M, b)
    np.testing.assert_allclose(anderson_step(history), fixed, rtol=1e-8, atol=1e-10)
    assert anderson_step(history[:1]) is None


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


@pytest.mark.parametrize("alpha", [1.0, 2.0])
@pytest.mark.parametrize("seed", [2, 5])
def test_ecme_result_is_the_joint_stationary_point(alpha: float, seed: int) -> None:
    # β is the exact EM mode at the returned ν, and ν the conditional mode of F given β
    X, y = make_classification(n_samples=3000, n_features=10, n_informative=5, flip_y=0.05,
                               random_state=seed)  # fmt: skip
    Xt, pen = _standardised(X, y)
    res = fit_ecme(Xt, alpha=alpha, penalised=pen)
    assert res.converged and res.polished
    em = fit_em(Xt, alpha=alpha, nu=res.nu, penalised=pen)
    assert em.polished
    np.testing.assert_allclose(res.beta, em.beta, rtol=0, atol=1e-9)
    assert res.objective == pytest.approx(em.objective, rel=1e-12)
    k, s = int(pen.sum()), float(np.sum(np.abs(res.beta[pen]) ** alpha))
    assert res.nu**-alpha == pytest.approx(tau_mode(s, alpha, k, 1.0, 1.0), rel=10 * NU_TOL)
    hinge = float(np.maximum(0.0, 1.0 - Xt @ res.beta).sum())

    def f(log_nu: float) -> float:
        """F(β, ν) at the returned β, as a function of ν alone."""
        return ecme_value(hinge, res.beta, np.exp(log_nu), alpha=alpha, a_nu=1.0, b_nu=1.0,
                          penalised=pen)  # fmt: skip

    log_nu = np.log(res.nu)
    best = minimize_scalar(f, bounds=(log_nu - 1.0, log_nu + 1.0), method="bounded",
                           options={"xatol": 1e-10})  # fmt: skip
    assert best.x == pytest.approx(log_nu, abs=1e-6)
    assert f(log_nu) <= best.fun + 1e-12 * abs(best.fun)


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
