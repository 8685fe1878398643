"""EM for the Bayesian SVM mode with ν fixed: IRLS with ε-floored weights, Polson & Scott (2011) §3.

Everything works on ``Xt``, the n×k matrix of rows ỹ_i = y_i x_i (intercept column, if any, included and
left unpenalised through ``penalised``). The augmented model with parameters (α, ν) has its mode at

    argmin_β  2 Σ_i max(1 − x̃_i'β, 0) + ν^{-α} Σ_{j penalised} |β_j|^α,

i.e. at argmin d_α(·, 2^{1/α} ν) (bayes-svm.md §1.1). The *reported* objective is that d_α:
Σ hinge + ν^{-α} S / 2 with S = Σ_j |β_j|^α.

For α = 1 and α = 2 a converged EM run is finished by an active-set step (bayes-svm.md §4, option 2):
the margin points found by EM become equality constraints, the reduced problem is solved exactly, and
the result is kept only if it passes the KKT conditions, which certify the global optimum (convex case).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

ProgressFn = Callable[[float], None]

RESIDUAL_FLOOR = 1e-9
"""Final ε of the weight floor 1/max(|r_i|, ε): exact MM for a Huberised hinge ≤ nε/4 suboptimal."""

FLOOR_START = 1e-3
"""First ε of the continuation: ε shrinks tenfold each time EM settles (change ≤ 100 tol) at it.

With a fixed tiny ε, points that reach the margin early get weights ~1/ε and stay captured, and EM
stalls (seen: a 2e-5 relative gap on breast cancer); shrinking ε gradually avoids the stall."""

SMALL_PROBLEM = 2_000_000_000
"""Below this n·k², BLAS runs single-threaded. The products here are thin (k ≤ a few hundred), and
on a shared 2-core machine OpenBLAS threads spinning for a core cost 10-35x (measured at 20k × 51)."""

COEF_FLOOR = 1e-10
"""Floor of |β_j| in the prior weight α ν^{-α} |β_j|^{α-2}, so that β_j = 0 is never absorbing."""

POLISH_EVERY = 10
"""Try the active-set finish every this many EM iterations (each try costs O(nk), an EM step O(nk²))."""

POLISH_THRESHOLDS = (1e-3, 1e-5, 1e-7)
"""Residual (and, for α = 1, coefficient) thresholds tried when reading the active sets off EM."""

KKT_TOL = 1e-9
"""Slack allowed in the KKT certificate (multiplier bounds, residual signs)."""

ACTIVE_SET_ROUNDS = 25
"""Cap on the primal-dual active-set rounds of the α = 2 finish."""


@dataclass(frozen=True)
class EMResult:
    """Outcome of an EM or ECME run.

    Attributes
    ----------
    beta : ndarray of shape (k,)
        The mode, on the scale of ``Xt``'s columns.
    objective : float
        d_α(β, 2^{1/α} ν) = Σ hinge + ν^{-α} S / 2 at the returned β (ECME: at the learned ν).
    n_iter : int
        EM iterations done.
    converged : bool
        True if the relative change of the objective fell below ``tol`` or the KKT check passed.
    nu : float
        ν used (EM) or learned (ECME).
    polished : bool
        True if the active-set finish certified the result.
    """

    beta: np.ndarray
    objective: float
    n_iter: int
    converged: bool
    nu: float
    polished: bool = False


def hinge_objective(
    Xt: np.ndarray, beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray
) -> float:
    """d_α(β, 2^{1/α} ν) = Σ max(1 − x̃'β, 0) + ν^{-α} Σ|β_j|^α / 2; bayes-svm.md §1.1."""
    hinge = np.maximum(1.0 - Xt @ beta, 0.0).sum()
    return float(hinge + 0.5 * nu ** (-alpha) * np.sum(np.abs(beta[penalised]) ** alpha))


def prior_precision(beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray) -> np.ndarray:
    """p_j = α ν^{-α} |β_j|^{α-2} (0 if unpenalised): ν^{-2} E[ω_j^{-1} | β_j]; bayes-svm.md §4."""
    p = np.zeros(beta.shape[0])
    if alpha == 2.0:
        p[penalised] = 2.0 * nu**-2.0
    else:
        p[penalised] = (
            alpha
            * nu ** (-alpha)
            * np.maximum(np.abs(beta[penalised]), COEF_FLOOR) ** (alpha - 2.0)
        )
    return p


def m_step(
    Xt: np.ndarray, beta: np.ndarray, p: np.ndarray, eps: float = RESIDUAL_FLOOR
) -> np.ndarray:
    """β ← (P + X̃'Λ^{-1}X̃)^{-1} X̃'(1 + λ^{-1}) with λ_i^{-1} = 1/max(|r_i|, ε); P & S (2011) §3."""
    w = 1.0 / np.maximum(np.abs(1.0 - Xt @ beta), eps)
    G = Xt.T @ (Xt * w[:, None])
    G[np.diag_indices_from(G)] += p
    rhs = Xt.T @ (1.0 + w)
    try:
        return scipy.linalg.solve(G, rhs, assume_a="pos", check_finite=False)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        return np.linalg.lstsq(G, rhs, rcond=None)[0]


def starting_point(Xt: np.ndarray, penalised: np.ndarray) -> np.ndarray:
    """Ridge least-squares fit of X̃β ≈ 1: away from zero, as EM needs for α < 2 (bayes-svm.md §4)."""
    G = Xt.T @ Xt
    G[np.diag_indices_from(G)] += np.where(penalised, 1.0, 1e-8)
    beta = scipy.linalg.solve(G, Xt.sum(axis=0), assume_a="pos", check_finite=False)
    # exact zeros are absorbing for alpha < 2: nudge them off zero
    return np.where(np.abs(beta) < 1e-6, 1e-6, beta)


def relative_change(old: float, new: float) -> float:
    """|old − new| / max(|new|, 1e-300): the stopping statistic of EM and ECME."""
    return abs(old - new) / max(abs(new), 1e-300)


def _face_ridge(
    Xt: np.ndarray, on: np.ndarray, over: np.ndarray, tau: float, penalised: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Solve min 2Σ_over r_i + τ‖β_pen‖² s.t. x̃_i'β = 1 on ``on``: a (k+m)² KKT system."""
    A = Xt[on]
    m, k = A.shape
    K = np.zeros((k + m, k + m))
    K[np.arange(k), np.arange(k)] = 2.0 * tau * penalised
    K[:k, k:] = -A.T
    K[k:, :k] = A
    rhs = np.concatenate([2.0 * Xt[over].sum(axis=0), np.ones(m)])
    try:
        sol = np.linalg.solve(K, rhs)
    except np.linalg.LinAlgError:
        return None
    mu = np.zeros(Xt.shape[0])
    mu[on] = sol[k:]
    return sol[:k], mu


def _active_set_ridge(
    Xt: np.ndarray, r: np.ndarray, tau: float, penalised: np.ndarray, delta: float
) -> np.ndarray | None:
    """α = 2 primal-dual active set from EM's sets; returns β only once μ ∈ [0, 2] and signs agree."""
    k = Xt.shape[1]
    near = np.flatnonzero(np.abs(r) <= delta)
    if near.size == 0:
        return None
    on = np.zeros(r.shape[0], dtype=bool)
    on[near[np.argsort(np.abs(r[near]))[:k]]] = True
    over = ~on & (r > 0)
    for _ in range(ACTIVE_SET_ROUNDS):
        face = _face_ridge(Xt, on, over, tau, penalised)
        if face is None:
            return None
        beta, mu = face
        r_new = 1.0 - Xt @ beta
        under = ~on & ~over
        leave_low = on & (mu < -KKT_TOL)
        leave_high = on & (mu > 2.0 + KKT_TOL)
        enter = (over & (r_new < -KKT_TOL)) | (under & (r_new > KKT_TOL))
        if not (leave_low.any() or leave_high.any() or enter.any()):
            return beta
        on = (on & ~leave_low & ~leave_high) | enter
        over = (over & ~enter) | leave_high
        if on.sum() > k:  # more margin points than coefficients: EM is not close yet
            return None
    return None


def _kkt_lasso(
    Xt: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    tau: float,
    penalised: np.ndarray,
    delta: float,
) -> np.ndarray | None:
    """α = 1 vertex solve: x̃_i'β = 1 on E, β_j = 0 on Z; dual μ ∈ [0, 2], |g_Z| ≤ 1 certify it."""
    on, over = np.abs(r) <= delta, r > delta
    free = ~penalised | (np.abs(beta) > delta)
    if on.sum() != free.sum() or not free.any():
        return None
    A = Xt[on]
    sign = np.where(penalised, np.sign(beta), 0.0)
    pull = 2.0 * Xt[over].sum(axis=0)
    try:
        beta_f = np.linalg.solve(A[:, free], np.ones(A.shape[0]))
        mu = np.linalg.solve(A[:, free].T, tau * sign[free] - pull[free])
    except np.linalg.LinAlgError:
        return None
    new = np.zeros_like(beta)
    new[free] = beta_f
    g_zero = (pull[~free] + A[:, ~free].T @ mu) / tau
    ok = (
        np.all(mu >= -KKT_TOL)
        and np.all(mu <= 2.0 + KKT_TOL)
        and np.all(np.abs(g_zero) <= 1.0 + KKT_TOL)
        and np.all(np.sign(new[free & penalised]) == sign[free & penalised])
    )
    return new if ok else None


def polish(
    Xt: np.ndarray, beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray
) -> np.ndarray | None:
    """Active-set finish (bayes-svm.md §4, option 2) for α ∈ {1, 2}; None unless KKT-certified.

    The sets are read off the EM iterate at a ladder of thresholds. α = 2: primal-dual active-set
    rounds until the multipliers lie in [0, 2] and every residual keeps the sign of its set. α = 1:
    the vertex with as many margin points as free coefficients, with its dual checked. Either is a
    KKT point, hence the global optimum of the convex objective.
    """
    tau = nu ** (-alpha)
    r = 1.0 - Xt @ beta
    for delta in POLISH_THRESHOLDS:
        if alpha == 2.0:
            cand = _active_set_ridge(Xt, r, tau, penalised, delta)
            if cand is not None:
                return cand
            continue
        cand = _kkt_lasso(Xt, r, beta, tau, penalised, delta)
        if cand is None:
            continue
        r_new = 1.0 - Xt @ cand
        on, over = np.abs(r) <= delta, r > delta
        under = ~on & ~over
        if np.all(r_new[over] >= -KKT_TOL) and np.all(r_new[under] <= KKT_TOL):
            return cand
    return None


def fit_em(
    Xt: np.ndarray,
    *,
    alpha: float = 1.0,
    nu: float = 1.0,
    penalised: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 10000,
    beta0: np.ndarray | None = None,
    finish: bool = True,
    progress: ProgressFn | None = None,
) -> EMResult:
    """Mode of the Polson–Scott pseudo-posterior with ν fixed, by EM (bayes-svm.md §4).

    Parameters
    ----------
    Xt : ndarray of shape (n, k)
        Rows y_i x_i.
    alpha : float in (0, 2]
        Exponent of the exponential-power prior.
    nu : float > 0
        Prior scale; the mode minimises d_α(·, 2^{1/α} ν).
    penalised : ndarray of bool, shape (k,), optional
        Which coefficients carry the prior (False for a flat-prior intercept). Default: all.
    tol : float
        Stop when the relative change of the objective is at most ``tol``.
    max_iter : int
        Iteration cap.
    beta0 : ndarray of shape (k,), optional
        Starting point (default: ridge least squares, never zero).
    finish : bool
        Try the certified active-set finish for α ∈ {1, 2}.
    progress : callable, optional
        Called with the fraction of ``max_iter`` done every few iterations; an exception stops the run.

    Returns
    -------
    EMResult
    """
    Xt = np.asarray(Xt, dtype=np.float64)
    k = Xt.shape[1]
    penalised = np.ones(k, dtype=bool) if penalised is None else np.asarray(penalised, dtype=bool)
    with blas_threads(Xt):
        beta = starting_point(Xt, penalised) if beta0 is None else np.array(beta0, np.float64)
        return _em_loop(Xt, beta, alpha, nu, penalised, tol, max_iter, finish, progress)


def blas_threads(Xt: np.ndarray) -> threadpool_limits | contextlib.nullcontext:
    """One BLAS thread for small problems (see SMALL_PROBLEM), the library default otherwise."""
    n, k = Xt.shape
    if n * k * k < SMALL_PROBLEM:
        return threadpool_limits(limits=1, user_api="blas")
    return contextlib.nullcontext()


def _em_loop(
    Xt: np.ndarray,
    beta: np.ndarray,
    alpha: float,
    nu: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
    finish: bool,
    progress: ProgressFn | None,
) -> EMResult:
    """The EM iterations of fit_em, with the ε continuation and the periodic certified finish."""
    f_old = hinge_objective(Xt, beta, alpha, nu, penalised)
    can_finish = finish and alpha in (1.0, 2.0)
    eps = max(FLOOR_START, RESIDUAL_FLOOR)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        beta = m_step(Xt, beta, prior_precision(beta, alpha, nu, penalised), eps)
        f_new = hinge_objective(Xt, beta, alpha, nu, penalised)
        change = relative_change(f_old, f_new)
        converged = change <= tol and eps <= RESIDUAL_FLOOR
        if change <= 100.0 * tol:
            eps = max(0.1 * eps, RESIDUAL_FLOOR)
        f_old = f_new
        if can_finish and (converged or n_iter % POLISH_EVERY == 0):
            exact = polish(Xt, beta, alpha, nu, penalised)
            if exact is not None:
                f_exact = hinge_objective(Xt, exact, alpha, nu, penalised)
                if f_exact <= f_new + 1e-12 * max(abs(f_new), 1.0):
                    return EMResult(exact, f_exact, n_iter, True, float(nu), polished=True)
        if converged:
            break
        if progress is not None and n_iter % 50 == 0:
            progress(n_iter / max_iter)
    return EMResult(beta, f_old, n_iter, converged, float(nu))
