"""Exact linear SVM: smoothed-hinge Newton continuation, then a primal-dual active-set finish.

Solves min_{w,b} ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)), b unpenalised, to round-off:

1. **Smoothing continuation.** Newton's method on the Huber-smoothed hinge of width μ (Chapelle 2007,
   §4), μ = 10, 1, 0.1, ..., each stage warm-started from the last. Every step is one pass over X plus
   a (d+1)×(d+1) solve, so the work is a few BLAS calls per stage (`linear_smooth`).
2. **Active-set finish.** Once few points lie in the quadratic zone of h_μ, α_i = C clip(z_i/μ, 0, 1)
   is a good dual guess; primal-dual active-set steps (Hintermüller, Ito & Kunisch 2003) solve the KKT
   system of the guessed partition exactly and re-partition until every KKT condition holds
   (`linear_active_set`). If that fails (degenerate data), smoothing continues; the returned point
   then carries the certificate P(w) − P* ≤ P(w) − F_μ(w) ≤ C n μ / 2.

When d > n the weights lie in the row space of X, so X = R'Q' (QR of X') reduces the problem to n
features and w = Q u. ``C = inf`` is the hard margin: a linear-programming feasibility check (HiGHS)
decides separability first (raising `NotSeparableError` otherwise), then the soft problem is solved
for growing C until no multiplier sits at its bound, which is the hard-margin solution
(for C ≥ max α_i of the hard-margin dual the two problems coincide).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.optimize import linprog

from ..exceptions import NotSeparableError
from .linear_active_set import active_set_polish
from .linear_objective import LinearSolution, primal_from_residuals, primal_objective
from .linear_smooth import smoothed_newton, smoothed_objective

MU_START = 10.0
MU_MIN = 1e-12
FINISH_MU = 0.011
"""Largest smoothing width at which the working-set finish is tried."""


def fit_linear_exact(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    fit_intercept: bool = True,
    tol: float = 1e-4,
    max_iter: int = 1000,
) -> LinearSolution:
    """Exact soft- (or hard-, C = inf) margin linear SVM on ±1 labels; see the module docstring."""
    n, d = X.shape
    if d > n:
        Q, R = linalg.qr(X.T, mode="economic", check_finite=False)
        sol = fit_linear_exact(R.T, y, C, fit_intercept, tol, max_iter)
        return LinearSolution(Q @ sol.w, sol.b, sol.n_iter, sol.converged, sol.objective)
    if np.isinf(C):
        return _hard_margin(X, y, fit_intercept, tol, max_iter)
    return _soft_margin(X, y, C, fit_intercept, tol, max_iter)[0]


def _soft_margin(
    X: np.ndarray, y: np.ndarray, C: float, fit_intercept: bool, tol: float, max_iter: int
) -> tuple[LinearSolution, np.ndarray | None]:
    """Smoothing continuation with a working-set finish; return (solution, exact dual or None)."""
    d = X.shape[1]
    w, b, mu, total = np.zeros(d), 0.0, MU_START, 0
    while True:
        w, b, k = smoothed_newton(
            X, y, C, mu, w, b, fit_intercept, max(1, min(50, max_iter - total))
        )
        total += k
        z = 1.0 - y * (X @ w + b)
        if mu <= FINISH_MU:
            w2, b2, alpha, k2, exact = active_set_polish(X, y, C, z, mu, fit_intercept)
            total += k2
            if exact:
                return LinearSolution(w2, b2, total, True, primal_objective(X, y, w2, b2, C)), alpha
        p = primal_from_residuals(w, z, C)
        gap_bound = p - smoothed_objective(w, z, C, mu)
        if total >= max_iter or mu <= MU_MIN or gap_bound <= 1e-15 * max(p, 1.0):
            converged = bool(gap_bound <= tol * max(p, 1e-300))
            return LinearSolution(w, b, total, converged, p), None
        mu *= 0.1


def is_separable(X: np.ndarray, y: np.ndarray, fit_intercept: bool) -> bool:
    """Whether some (w, b) has y_i(w'x_i + b) ≥ 1 for all i: an LP feasibility problem (HiGHS)."""
    A = -(y[:, None] * X)
    if fit_intercept:
        A = np.hstack([A, -y[:, None]])
    res = linprog(
        np.zeros(A.shape[1]), A_ub=A, b_ub=-np.ones(X.shape[0]), bounds=(None, None), method="highs"
    )
    if res.status == 2:
        return False
    if res.status != 0:
        raise NotSeparableError(f"The separability check failed: {res.message}")
    return True


def _hard_margin(
    X: np.ndarray, y: np.ndarray, fit_intercept: bool, tol: float, max_iter: int
) -> LinearSolution:
    """Hard margin: LP feasibility, then soft solutions for C = 1, 100, ... until none is at bound."""
    if not is_separable(X, y, fit_intercept):
        raise NotSeparableError(
            "C=inf asks for a hard margin, but no hyperplane separates the two classes "
            "(the linear-programming feasibility check is infeasible); use a finite C."
        )
    total = 0
    soft = None
    for C in 10.0 ** np.arange(0, 13, 2):
        soft, alpha = _soft_margin(X, y, float(C), fit_intercept, tol, max_iter)
        total += soft.n_iter
        if alpha is not None and alpha.max() < C * (1.0 - 1e-9):
            w, b = soft.w, soft.b
            return LinearSolution(w, b, total, True, float(0.5 * (w @ w)))
    assert soft is not None
    return LinearSolution(soft.w, soft.b, total, False, float(0.5 * (soft.w @ soft.w)))
