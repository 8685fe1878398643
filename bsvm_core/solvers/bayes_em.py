"""EM for the Bayesian SVM mode with ν fixed: IRLS with ε-floored weights, Polson & Scott (2011) §3.

Everything works on ``Xt``, the n×k matrix of rows ỹ_i = y_i x_i (intercept column, if any, included and
left unpenalised through ``penalised``). The augmented model with parameters (α, ν) has its mode at

    argmin_β  2 Σ_i max(1 − x̃_i'β, 0) + ν^{-α} Σ_{j penalised} |β_j|^α,

i.e. at argmin d_α(·, 2^{1/α} ν) (bayes-svm.md §1.1). The *reported* objective is that d_α:
Σ hinge + ν^{-α} S / 2 with S = Σ_j |β_j|^α.

One EM step (bayes-svm.md §4) is one weighted ridge solve: residuals r → weights
w_i = 1/max(|r_i|, ε) → B = diag(√w) X̃ written into a buffer allocated once → the Gram B'B by one
BLAS syrk (numpy's choice for B.T @ B) → Cholesky. The residuals of the new β serve the objective,
the safeguard and the next weights, so nothing of size n×k is allocated per step.

EM converges linearly, slowly near the kinks (§4). Two devices keep its fixed point but need far
fewer steps:

* **Anderson acceleration** (type II, Walker & Ni 2011) of the map β ↦ M_ε(β) at fixed ε, with a
  monotonicity safeguard: the extrapolated β is kept only if it does not increase the ε-Huberised
  objective Φ_ε that the EM step itself decreases; otherwise the plain EM step is taken and the
  history restarts. So Φ_ε decreases monotonically, as for plain EM.
* **Certified finish** for α = 1 and α = 2 (`bayes_em_finish`, bayes-svm.md §4 option 2): once the
  relative change of the objective is small and few points still change side of the margin, the
  exact mode is read off the EM iterate and kept only if it passes the KKT conditions on every
  point, which certify the global optimum, and does not raise the objective.

The stopping rule (relative change of d_α at the final floor), the ε continuation and the start
away from zero are those of bayes-svm.md §0 and §4.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .._blas import single_blas_thread_if
from .bayes_em_finish import certified_mode, working_set_size

ProgressFn = Callable[[float], None]

RESIDUAL_FLOOR = 1e-9
"""Final ε of the weight floor 1/max(|r_i|, ε): exact MM for a Huberised hinge ≤ nε/4 suboptimal."""

FLOOR_START = 1e-1
"""First ε of the continuation: ε shrinks tenfold each time EM settles (change ≤ 100 tol) at it.

With a fixed tiny ε, points that reach the margin early get weights ~1/ε and stay captured, and EM
stalls (seen: a 2e-5 relative gap on breast cancer); shrinking ε gradually avoids the stall."""

SMALL_PROBLEM = 2_000_000_000
"""Below this n·k², BLAS runs single-threaded. The products here are thin (k ≤ a few hundred), and
on a shared 2-core machine OpenBLAS threads spinning for a core cost 10-35x (measured at 20k × 51)."""

COEF_FLOOR = 1e-10
"""Floor of |β_j| in the prior weight α ν^{-α} |β_j|^{α-2}, so that β_j = 0 is never absorbing."""

ANDERSON_MEMORY = 5
"""Number of past differences in the Anderson extrapolation (type II)."""

ANDERSON_RCOND = 1e-10
"""Relative cut-off of the least-squares solve for the Anderson coefficients."""

FINISH_START = 1e-2
"""The certified finish is tried once the relative change of the objective is at most this ..."""

FINISH_FLIPS = 0.1
"""... and at most this fraction of the finish's working set changed side (sign of r_i) in a step."""

FINISH_EVERY = 8
"""After a failed finish EM waits 1, 2, 4, ... up to this many iterations before the next try."""


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
        True if the certified finish (``bayes_em_finish``) produced the result.
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
    return residual_objective(1.0 - Xt @ beta, beta, alpha, nu, penalised)


def penalty_sum(beta: np.ndarray, alpha: float, penalised: np.ndarray) -> float:
    """S = Σ_{j penalised} |β_j|^α (σ_j = 1 on the standardised scale); bayes-svm.md §3.5."""
    return float(np.sum(np.abs(beta[penalised]) ** alpha))


def residual_objective(
    r: np.ndarray, beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray
) -> float:
    """d_α(β, 2^{1/α} ν) = Σ max(r_i, 0) + ν^{-α} Σ|β_j|^α / 2 from the residuals r = 1 − X̃β."""
    hinge = np.maximum(r, 0.0).sum()
    return float(hinge + 0.5 * nu ** (-alpha) * penalty_sum(beta, alpha, penalised))


def huberised_objective(
    r: np.ndarray, beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray, eps: float
) -> float:
    """Φ_ε = Σ (r_i + H_ε(r_i))/2 + ν^{-α} S / 2, H_ε = Huber of |r|: what EM at floor ε decreases (§4)."""
    a = np.abs(r)
    huber = np.where(a < eps, 0.5 * (a * a / eps + eps), a)
    return float(
        0.5 * np.sum(r + huber) + 0.5 * nu ** (-alpha) * penalty_sum(beta, alpha, penalised)
    )


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


def em_update(
    Xt: np.ndarray,
    r: np.ndarray,
    p: np.ndarray,
    eps: float = RESIDUAL_FLOOR,
    buf: np.ndarray | None = None,
) -> np.ndarray:
    """β ← (P + X̃'Λ^{-1}X̃)^{-1} X̃'(1 + λ^{-1}), λ_i^{-1} = 1/max(|r_i|, ε), r = 1 − X̃β; P & S §3.

    X̃'Λ^{-1}X̃ = B'B with B = diag(√λ^{-1}) X̃ (written into ``buf`` when given): one syrk.
    """
    w = 1.0 / np.maximum(np.abs(r), eps)
    B = np.multiply(Xt, np.sqrt(w)[:, None], out=buf)
    return solve_m_step(B.T @ B, Xt.T @ (1.0 + w), p)


def solve_m_step(gram: np.ndarray, rhs: np.ndarray, p: np.ndarray) -> np.ndarray:
    """β = (P + X̃'Λ^{-1}X̃)^{-1} X̃'(1 + λ^{-1}) from the sums; P & S §3 (``gram`` is overwritten)."""
    gram[np.diag_indices_from(gram)] += p
    try:
        chol = scipy.linalg.cho_factor(gram, check_finite=False)
        return scipy.linalg.cho_solve(chol, rhs, check_finite=False)
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def anderson_step(history: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray | None:
    """Type-II Anderson x⁺ = g_k − ΔG γ, γ = argmin ‖f_k − ΔF γ‖, f_i = g_i − x_i; Walker & Ni (2011).

    ``history`` holds pairs (x_i, g_i = M(x_i)) of the fixed-point map, oldest first.
    """
    if len(history) < 2:
        return None
    X = np.array([x for x, _ in history])
    G = np.array([g for _, g in history])
    F = G - X
    dF, dG = np.diff(F, axis=0), np.diff(G, axis=0)
    gamma = np.linalg.lstsq(dF.T, F[-1], rcond=ANDERSON_RCOND)[0]
    cand = G[-1] - dG.T @ gamma
    return cand if np.all(np.isfinite(cand)) else None


def starting_point(Xt: np.ndarray, penalised: np.ndarray) -> np.ndarray:
    """Ridge least-squares fit of X̃β ≈ 1: away from zero, as EM needs for α < 2 (bayes-svm.md §4)."""
    return ridge_start(Xt.T @ Xt, Xt.sum(axis=0), penalised)


def warm_point(beta: np.ndarray) -> np.ndarray:
    """A previous mode as EM's start, exact zeros nudged to 1e-6 (zero is absorbing for α < 2)."""
    return np.where(np.abs(beta) < 1e-6, 1e-6, beta)


def ridge_start(gram: np.ndarray, total: np.ndarray, penalised: np.ndarray) -> np.ndarray:
    """(X̃'X̃ + I_pen)^{-1} X̃'1 from the sums, exact zeros nudged to 1e-6 (``gram`` overwritten)."""
    gram[np.diag_indices_from(gram)] += np.where(penalised, 1.0, 1e-8)
    beta = scipy.linalg.solve(gram, total, assume_a="pos", check_finite=False)
    # exact zeros are absorbing for alpha < 2: nudge them off zero
    return np.where(np.abs(beta) < 1e-6, 1e-6, beta)


def relative_change(old: float, new: float) -> float:
    """|old − new| / max(|new|, 1e-300): the stopping statistic of EM and ECME."""
    return abs(old - new) / max(abs(new), 1e-300)


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
        Try the certified finish (``bayes_em_finish``) for α ∈ {1, 2}.
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


def blas_threads(Xt: np.ndarray) -> contextlib.AbstractContextManager[None]:
    """One BLAS thread for small problems (see SMALL_PROBLEM), the library default otherwise."""
    n, k = Xt.shape
    return single_blas_thread_if(n * k * k < SMALL_PROBLEM)


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
    """The EM iterations of fit_em: ε continuation, safeguarded Anderson steps, certified finish."""
    buf = np.empty_like(Xt)
    eps = max(FLOOR_START, RESIDUAL_FLOOR)
    r = 1.0 - Xt @ beta
    f_old = residual_objective(r, beta, alpha, nu, penalised)
    history: list[tuple[np.ndarray, np.ndarray]] = []
    can_finish = finish and alpha in (1.0, 2.0)
    max_flips = FINISH_FLIPS * working_set_size(*Xt.shape)
    wait, next_finish = 1, 1
    side = r > 0.0
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        g = em_update(Xt, r, prior_precision(beta, alpha, nu, penalised), eps, buf)
        history = [*history[-ANDERSON_MEMORY:], (beta, g)]
        beta, r = g, 1.0 - Xt @ g
        phi = huberised_objective(r, beta, alpha, nu, penalised, eps)
        cand = anderson_step(history)
        if cand is not None:
            r_cand = 1.0 - Xt @ cand
            phi_cand = huberised_objective(r_cand, cand, alpha, nu, penalised, eps)
            if phi_cand < phi:
                beta, r, phi = cand, r_cand, phi_cand
            else:
                history = history[-1:]
        f_new = residual_objective(r, beta, alpha, nu, penalised)
        change = relative_change(f_old, f_new)
        converged = change <= tol and eps <= RESIDUAL_FLOOR
        if change <= 100.0 * tol and eps > RESIDUAL_FLOOR:
            eps = max(0.1 * eps, RESIDUAL_FLOOR)
            history = []
        f_old = f_new
        flips = np.count_nonzero(side != (r > 0.0))
        side = r > 0.0
        settled = change <= FINISH_START and flips <= max_flips and n_iter >= next_finish
        if can_finish and (converged or settled):
            exact = certified_mode(Xt, beta, alpha, nu, penalised)
            if exact is not None:
                f_exact = hinge_objective(Xt, exact, alpha, nu, penalised)
                if f_exact <= f_new + 1e-12 * max(abs(f_new), 1.0):
                    return EMResult(exact, f_exact, n_iter, True, float(nu), polished=True)
            next_finish, wait = n_iter + wait, min(2 * wait, FINISH_EVERY)
        if converged:
            break
        if progress is not None and n_iter % 50 == 0:
            progress(n_iter / max_iter)
    return EMResult(beta, f_old, n_iter, converged, float(nu))
