"""Spike-and-slab SVM by single-site Gibbs on γ with rank-one updates, bayes-svm.md §7.

Prior: γⱼ ~ Bernoulli(πⱼ) for penalised j (flat-prior coefficients always in), βⱼ = 0 when
γⱼ = 0. α = 2 is the paper's Gaussian slab of §7, βⱼ ~ N(0, ν²) (σⱼ = 1 on the standardised
scale, prior precision 1/ν²; note that this is *not* the exp(−β²/ν²) prior of the MCMC model, whose
variance is ν²/2). α = 1 (an extension; §7 only defines the Gaussian slab) is the Laplace slab
exp(−|βⱼ/ν|)/(2ν) as a normal scale mixture, ωⱼ ~ Exp(mean 2) and precision 1/(ν²ωⱼ) (§2.2).

One sweep: (γ | λ, ω, β integrated out, George & McCulloch single-site in random order)
→ (β_γ | γ, λ, ω ~ N(b_γ, B_γ)) → (ω | β, γ) → (λ | β).  With the included block's inverse
M = B_γ and h = Mρ_γ kept up to date, each γⱼ costs O(m²): the sweep is O(nk² + m³ + km²).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..random_variates import wald_inverse_mean
from .bayes_gibbs import Progress, ProgressReporter, check_mcmc_args, draw_lambda_inv
from .gaussian_draw import (
    blas_threads_for,
    cholesky_jittered,
    cholesky_solve,
    draw_from_precision,
    normal_equations,
)


class IncludedBlock:
    """M = (P_γ + G_γγ)⁻¹ and h = Mρ_γ for the included set, with O(m²) add/remove updates."""

    def __init__(
        self,
        G: NDArray[np.float64],
        rho: NDArray[np.float64],
        precision: NDArray[np.float64],
        included: list[int],
    ) -> None:
        self.G, self.rho, self.precision = G, rho, precision
        self.index = list(included)
        A = G[np.ix_(self.index, self.index)]
        A.flat[:: len(self.index) + 1] += precision[self.index]
        if self.index:
            L = cholesky_jittered(A)
            self.M = cholesky_solve(L, np.eye(len(self.index)))
        else:
            self.M = np.zeros((0, 0))
        self.h = self.M @ rho[self.index]

    def log_odds(self, j: int, log_prior_odds: float) -> tuple[float, tuple[Any, ...]]:
        """Δⱼ = log p(γⱼ=1, γ₋ⱼ | λ) − log p(γⱼ=0, γ₋ⱼ | λ) (§7) and the data to update with."""
        half_log_p = 0.5 * np.log(self.precision[j])
        if j in self.index:
            q = self.index.index(j)
            s = 1.0 / self.M[q, q]
            delta = log_prior_odds + half_log_p - 0.5 * np.log(s) + 0.5 * self.h[q] ** 2 * s
            return float(delta), (q,)
        a = self.G[self.index, j]
        u = self.M @ a
        s = self.G[j, j] + self.precision[j] - a @ u
        e = (self.rho[j] - a @ self.h) / s
        delta = log_prior_odds + half_log_p - 0.5 * np.log(s) + 0.5 * e * e * s
        return float(delta), (u, s, e)

    def add(self, j: int, u: NDArray[np.float64], s: float, e: float) -> None:
        """Append j: bordered inverse [[M + uu'/s, −u/s], [−u'/s, 1/s]], h ← [h − ue, e]."""
        m = len(self.index)
        M = np.empty((m + 1, m + 1))
        M[:m, :m] = self.M + np.outer(u, u) / s
        M[:m, m] = M[m, :m] = -u / s
        M[m, m] = 1.0 / s
        self.M = M
        self.h = np.append(self.h - u * e, e)
        self.index.append(j)

    def remove(self, q: int) -> None:
        """Drop position q: M ← M₋q₋q − M₋q,q M_q,₋q / M_qq and h ← h₋q − M₋q,q h_q / M_qq."""
        keep = np.arange(len(self.index)) != q
        col = self.M[keep, q] / self.M[q, q]
        self.h = self.h[keep] - col * self.h[q]
        self.M = self.M[np.ix_(keep, keep)] - np.outer(col, self.M[q, keep])
        del self.index[q]


def _inv_logit(x: float) -> float:
    """1 / (1 + e^{-x}) without overflow."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _slab_precision(
    alpha: float, nu: float, pen: NDArray[np.bool_], omega_inv: NDArray[np.float64]
) -> NDArray[np.float64]:
    """pⱼ = ν⁻² (Gaussian slab N(0, ν²), §7) for α = 2, 1/(ν² ωⱼ) for α = 1 (§2.2); 0 if flat."""
    p = np.zeros(pen.size)
    p[pen] = (1.0 if alpha == 2.0 else omega_inv[pen]) / nu**2
    return p


def _log_prior_odds(prior_inclusion: ArrayLike, pen: NDArray[np.bool_]) -> NDArray[np.float64]:
    pi = np.broadcast_to(np.asarray(prior_inclusion, dtype=np.float64), pen.shape)
    if np.any((pi[pen] <= 0.0) | (pi[pen] >= 1.0)):
        raise ValueError("prior_inclusion must lie strictly between 0 and 1")
    out = np.full(pen.size, np.inf)
    out[pen] = np.log(pi[pen]) - np.log1p(-pi[pen])
    return out


def run_spike_slab(
    Xt: NDArray[np.float64],
    *,
    alpha: float,
    nu: float,
    prior_inclusion: float | ArrayLike,
    n_draws: int,
    burn_in: int,
    thin: int,
    penalised: NDArray[np.bool_],
    seed: int | np.random.SeedSequence | None,
    progress: Progress = None,
) -> dict[str, Any]:
    """One chain of the spike-and-slab SVM; Polson & Scott (2011) §4.2, bayes-svm.md §7.

    Parameters
    ----------
    Xt : ndarray of shape (n, k)
        Rows yᵢxᵢ' (standardised predictors, intercept column first if any).
    alpha : {1, 2}
        Slab: 2 Gaussian N(0, ν²/2), 1 Laplace with scale ν (same prior as ``run_gibbs``).
    nu : float
        Slab scale ν > 0 (fixed).
    prior_inclusion : float or array of shape (k,)
        Prior inclusion probabilities πⱼ in (0, 1); ignored for unpenalised coefficients.
    n_draws, burn_in, thin : int
        Kept draws, discarded sweeps, and sweeps per kept draw.
    penalised : ndarray of bool, shape (k,)
        False for flat-prior coefficients, which are always included.
    seed : int, SeedSequence or None
        Seed of ``np.random.default_rng``.
    progress : callable, optional
        Called with the fraction of sweeps done; exceptions propagate (cancellation).

    Returns
    -------
    dict
        ``beta_draws`` (n_draws, k), ``gamma_draws`` (n_draws, k) bool, ``inclusion_prob`` (k,)
        Rao-Blackwellised (mean of P(γⱼ = 1 | rest) over post-burn-in sweeps), ``beta_rb`` (k,)
        the mean of b_γ (zeros outside γ), ``nu_draws`` (n_draws,) constant ν.
    """
    Xt, pen = check_mcmc_args(Xt, penalised, alpha, nu, n_draws, burn_in, thin)
    if alpha not in (1.0, 2.0):
        raise ValueError(f"spike-and-slab supports alpha = 1 or 2; got {alpha}")
    k = Xt.shape[1]
    log_odds = _log_prior_odds(prior_inclusion, pen)
    rng = np.random.default_rng(seed)
    total = burn_in + n_draws * thin
    report = ProgressReporter(progress, total)
    candidates = np.flatnonzero(pen)

    beta_draws = np.empty((n_draws, k))
    gamma_draws = np.empty((n_draws, k), dtype=bool)
    incl_sum = np.zeros(k)
    rb_sum = np.zeros(k)
    gamma = np.ones(k, dtype=bool)
    lam_inv = np.ones(Xt.shape[0])
    omega_inv = np.full(k, 0.5)

    with blas_threads_for(*Xt.shape):
        for sweep in range(1, total + 1):
            kept = sweep - burn_in
            G, rho = normal_equations(Xt, lam_inv)
            precision = _slab_precision(alpha, nu, pen, omega_inv)
            block = IncludedBlock(G, rho, precision, list(np.flatnonzero(gamma)))
            for j in rng.permutation(candidates):
                delta, update = block.log_odds(int(j), float(log_odds[j]))
                prob = _inv_logit(delta)
                if kept > 0:
                    incl_sum[j] += prob
                new = rng.random() < prob
                if new and not gamma[j]:
                    block.add(int(j), *update)
                elif gamma[j] and not new:
                    block.remove(*update)
                gamma[j] = new
            index = np.flatnonzero(gamma)
            A = G[np.ix_(index, index)]
            A.flat[:: index.size + 1] += precision[index]
            beta = np.zeros(k)
            b = np.zeros(k)
            if index.size:
                z = rng.standard_normal(index.size)
                beta[index], b[index] = draw_from_precision(A, rho[index], z)
            if alpha == 1.0:
                out = candidates[~gamma[candidates]]
                inn = candidates[gamma[candidates]]
                omega_inv[out] = 1.0 / rng.exponential(2.0, out.size)  # prior ω ~ Exp(mean 2)
                omega_inv[inn] = wald_inverse_mean(np.abs(beta[inn]) / nu, 1.0, rng)  # §3.3
            lam_inv = draw_lambda_inv(Xt, beta, rng)
            if kept > 0:
                rb_sum += b
                if kept % thin == 0:
                    beta_draws[kept // thin - 1] = beta
                    gamma_draws[kept // thin - 1] = gamma
            report(sweep)

    n_kept = n_draws * thin
    inclusion = incl_sum / n_kept
    inclusion[~pen] = 1.0
    return {
        "beta_draws": beta_draws,
        "gamma_draws": gamma_draws,
        "inclusion_prob": inclusion,
        "beta_rb": rb_sum / n_kept,
        "nu_draws": np.full(n_draws, float(nu)),
    }
