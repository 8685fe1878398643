"""ECME for the Bayesian SVM: EM in β plus the conditional-mode update of ν (bayes-svm.md §5).

Prior on τ = ν^{-α}: Gamma(a_ν, b_ν) (shape, rate). With ω integrated out, p(β | ν) ∝ τ^{k/α} e^{-τS}
(k = number of penalised coefficients, S = Σ|β_j|^α on the standardised scale), so ECME maximises the
observed-data log pseudo-posterior

    −F(β, τ) = −2 Σ max(1 − x̃_i'β, 0) − τ (S + b_ν) + (k/α + a_ν − 1) log τ,

alternating one EM step in β at the current ν with the exact CME step in τ:

    τ ← (k/α + a_ν − 1) / (b_ν + S),   ν = τ^{-1/α}

(the inverted form printed in some write-ups, (b_ν + S)/(k/α + a_ν − 1), is the formula for ν^{+α}).

**Exact finish** (α ∈ {1, 2}, ``joint_mode``). ECME stops at its tolerance on an iterate still
about √tol from its fixed point, and near the margin the EM weights 1/max(|r|, ε) magnify any
difference in how the iterate was reached (e.g. the order of sums over row partitions). So once
the loop has converged, the two conditional maximisations are done exactly and alternated: β ← the
KKT-certified mode at the current ν (``bayes_em_finish.certified_mode``, or EM at that ν until its
finish certifies one), then the CME step τ ← (k/α + a_ν − 1)/(b_ν + S), until the step moves τ by at
most NU_TOL relative. Each half lowers F, and the result is the joint stationary point: β the exact
mode given ν, ν the conditional mode given β. Near the mode β*(ν) is locally constant (α = 1: a
vertex) or varies slowly with ν, so two or three rounds suffice. ``fit_ecme`` answers the mode
requests in memory; ``bayes_em_partitions`` answers them with passes over the partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np

from ..exceptions import BsvmValueError
from .bayes_em import (
    FLOOR_START,
    RESIDUAL_FLOOR,
    EMResult,
    ProgressFn,
    blas_threads,
    em_update,
    fit_em,
    penalty_sum,
    prior_precision,
    residual_objective,
    starting_point,
)
from .bayes_em_finish import certified_mode

NU_TOL = 1e-13
"""The exact finish stops once the CME step moves τ = ν^{-α} by at most this relative amount."""

FINISH_ROUNDS = 50
"""Cap on the rounds (exact mode at ν, then CME step) of the exact finish."""

ModeRequest = tuple[np.ndarray, float]
"""(β near the mode, ν): ask for the exact mode at ν."""

ModeReply = tuple[np.ndarray, float] | None
"""(the certified mode at ν, Σ max(1 − x̃_i'β, 0) there), or None if none was certified."""

JointMode = Generator[ModeRequest, ModeReply, tuple[np.ndarray, float, float] | None]


def tau_mode(s: float, alpha: float, k: int, a_nu: float, b_nu: float) -> float:
    """CME step τ = (k/α + a_ν − 1)/(b_ν + S): the Gamma mode in τ = ν^{-α}; bayes-svm.md §5."""
    return (k / alpha + a_nu - 1.0) / (b_nu + s)


def cme_nu(
    beta: np.ndarray, alpha: float, k: int, a_nu: float, b_nu: float, penalised: np.ndarray
) -> float:
    """ν = τ^{-1/α} with τ the CME step at β (``tau_mode``); bayes-svm.md §5."""
    return float(
        tau_mode(penalty_sum(beta, alpha, penalised), alpha, k, a_nu, b_nu) ** (-1.0 / alpha)
    )


def joint_mode(
    beta: np.ndarray, nu: float, *, alpha: float, a_nu: float, b_nu: float, penalised: np.ndarray
) -> JointMode:
    """Exact finish: β ← exact mode at ν, ν ← CME step at β, until τ is fixed (module docstring).

    Yields (β, ν) and is sent the exact mode at ν (``ModeReply``). Returns (β, ν, Σ hinge at β) with
    β the certified mode at ν and the CME step at β within NU_TOL of τ = ν^{-α}; None if a mode is
    not certified or τ is not fixed within FINISH_ROUNDS rounds.
    """
    k = int(penalised.sum())
    for _ in range(FINISH_ROUNDS):
        reply = yield beta, nu
        if reply is None:
            return None
        beta, hinge = reply
        nu_new = cme_nu(beta, alpha, k, a_nu, b_nu, penalised)
        tau, tau_new = nu ** (-alpha), nu_new ** (-alpha)
        if abs(tau_new - tau) <= NU_TOL * tau:
            return beta, nu, hinge
        nu = nu_new
    return None


def exact_mode(
    Xt: np.ndarray,
    beta: np.ndarray,
    nu: float,
    *,
    alpha: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
) -> ModeReply:
    """The certified mode at ν near β, else EM at ν from β until its finish certifies one (§4)."""
    exact = certified_mode(Xt, beta, alpha, nu, penalised)
    if exact is None:
        res = fit_em(Xt, alpha=alpha, nu=nu, penalised=penalised, tol=tol, max_iter=max_iter,
                     beta0=beta)  # fmt: skip
        if not res.polished:
            return None
        exact = res.beta
    return exact, float(np.maximum(1.0 - Xt @ exact, 0.0).sum())


def run_joint_mode(
    finish: JointMode, solve: Callable[[np.ndarray, float], ModeReply]
) -> tuple[np.ndarray, float, float] | None:
    """Drive ``joint_mode`` with ``solve(β, ν)`` answering its mode requests; its return value."""
    try:
        request = next(finish)
        while True:
            request = finish.send(solve(*request))
    except StopIteration as stop:
        return stop.value


def ecme_objective(
    r: np.ndarray,
    beta: np.ndarray,
    nu: float,
    *,
    alpha: float,
    a_nu: float,
    b_nu: float,
    penalised: np.ndarray,
) -> float:
    """F(β, τ) = 2 Σ hinge + τ (S + b_ν) − (k/α + a_ν − 1) log τ from the residuals r = 1 − X̃β.

    This is minus the log pseudo-posterior.
    """
    hinge = float(np.maximum(r, 0.0).sum())
    return ecme_value(hinge, beta, nu, alpha=alpha, a_nu=a_nu, b_nu=b_nu, penalised=penalised)


def ecme_value(
    hinge: float,
    beta: np.ndarray,
    nu: float,
    *,
    alpha: float,
    a_nu: float,
    b_nu: float,
    penalised: np.ndarray,
) -> float:
    """F(β, τ) = 2 Σ hinge + τ (S + b_ν) − (k/α + a_ν − 1) log τ from Σ hinge; bayes-svm.md §5."""
    k = int(penalised.sum())
    tau = nu ** (-alpha)
    s = penalty_sum(beta, alpha, penalised)
    return float(2.0 * hinge + tau * (s + b_nu) - (k / alpha + a_nu - 1.0) * np.log(tau))


def fit_ecme(
    Xt: np.ndarray,
    *,
    alpha: float = 1.0,
    nu0: float = 1.0,
    a_nu: float = 1.0,
    b_nu: float = 1.0,
    penalised: np.ndarray | None = None,
    tol: float = 1e-8,
    max_iter: int = 10000,
    progress: ProgressFn | None = None,
) -> EMResult:
    """Joint mode of (β, ν) by ECME (bayes-svm.md §5).

    Parameters
    ----------
    Xt : ndarray of shape (n, k)
        Rows y_i x_i.
    alpha : float in (0, 2]
        Exponent of the exponential-power prior.
    nu0 : float > 0
        Starting ν.
    a_nu, b_nu : float > 0
        Shape and rate of the Gamma prior on τ = ν^{-α}; k/α + a_ν must exceed 1.
    penalised : ndarray of bool, shape (k,), optional
        Which coefficients carry the prior (False for a flat-prior intercept). Default: all.
    tol : float
        Stop when |ΔF| ≤ tol · max(|F|, 1) at the final weight floor.
    max_iter : int
        Iteration cap.
    progress : callable, optional
        Called with the fraction of ``max_iter`` done every 50 iterations; an exception stops the run.

    Returns
    -------
    EMResult
        ``nu`` is the learned ν; ``objective`` is d_α(β, 2^{1/α} ν) at that ν; ``polished`` if the
        exact finish (α ∈ {1, 2}, module docstring) produced the result.
    """
    Xt = np.asarray(Xt, dtype=np.float64)
    k_all = Xt.shape[1]
    penalised = np.ones(k_all, dtype=bool) if penalised is None else np.asarray(penalised, bool)
    k = int(penalised.sum())
    if k / alpha + a_nu <= 1.0:
        raise BsvmValueError(
            f"ECME needs k/alpha + a_nu > 1 for a finite nu; got k={k}, alpha={alpha}, a_nu={a_nu}."
        )
    opts = {"alpha": alpha, "a_nu": a_nu, "b_nu": b_nu, "penalised": penalised}
    beta, nu = starting_point(Xt, penalised), float(nu0)
    r = 1.0 - Xt @ beta
    f_old = ecme_objective(r, beta, nu, **opts)
    eps = max(FLOOR_START, RESIDUAL_FLOOR)
    buf = np.empty_like(Xt)
    converged = False
    n_iter = 0
    with blas_threads(Xt):
        for n_iter in range(1, max_iter + 1):
            beta = em_update(Xt, r, prior_precision(beta, alpha, nu, penalised), eps, buf)
            r = 1.0 - Xt @ beta
            nu = cme_nu(beta, alpha, k, a_nu, b_nu, penalised)
            f_new = ecme_objective(r, beta, nu, **opts)
            change = abs(f_old - f_new) / max(abs(f_new), 1.0)
            converged = change <= tol and eps <= RESIDUAL_FLOOR
            if change <= 100.0 * tol:
                eps = max(0.1 * eps, RESIDUAL_FLOOR)
            f_old = f_new
            if converged:
                break
            if progress is not None and n_iter % 50 == 0:
                progress(n_iter / max_iter)
        if converged and alpha in (1.0, 2.0):
            finish = joint_mode(beta, nu, alpha=alpha, a_nu=a_nu, b_nu=b_nu, penalised=penalised)
            found = run_joint_mode(
                finish,
                lambda b, v: exact_mode(Xt, b, v, alpha=alpha, penalised=penalised, tol=tol,
                                        max_iter=max_iter),
            )  # fmt: skip
            if found is not None:
                beta, nu, hinge = found
                objective = hinge + 0.5 * nu ** (-alpha) * penalty_sum(beta, alpha, penalised)
                return EMResult(beta, objective, n_iter, True, nu, polished=True)
    return EMResult(beta, residual_objective(r, beta, alpha, nu, penalised), n_iter, converged, nu)
