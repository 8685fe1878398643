"""Gibbs sampler of the Bayesian SVM by sums over row partitions: one pass per sweep, all chains.

The sweep of ``bayes_gibbs`` (bayes-svm.md §6) touches the rows only through λ | β and the sums
that β | λ, ω needs (§3.1): X̃'Λ⁻¹X̃ and X̃'(1 + λ⁻¹). λ is never kept: it is drawn, summed and
dropped on each partition (``bayes_sums.Latent``), from a stream derived from the seed, the
problem, the chain, the sweep and the partition, so a sweep is one pass for every chain of every
problem. The driver then draws, per chain, with its own stream ``default_rng([seed, 0, problem,
chain])``:

* α ∈ {1, 2}: β | λ, ω, ν ~ N(b, B) by Cholesky, over-relaxed against the previous β (ρ =
  ``bayes_gibbs.OVERRELAX``; the argument that the posterior is unchanged is in ``bayes_gibbs``),
  then τ = ν^{-α} | β (§3.5, ω integrated out) and ω | β, ν (α = 1, §3.3) with the ν just drawn;
* other α: the bridge scheme of §3.4 (β coordinate-wise from truncated normals given λ and u,
  then τ | β, then u | β, ν).

λ | β is the next pass. The in-memory sampler's collapsed Metropolis moves
(``collapsed_moves``) are left out: each would need Σ hinge at a proposal, a pass per move. The
chain targets the same posterior (every step is a Gibbs or over-relaxed Gibbs step of it) but its
slowest directions (the scale of β, the flat intercept) mix as in the plain augmentation sampler.
The Rao-Blackwellised mean averages b = E[β | λ, ω, ν] over the kept sweeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..partitions import RowPartitions
from ..random_variates import wald_inverse_mean
from .bayes_gibbs import OVERRELAX, ProgressReporter, _sweep_coordinates
from .bayes_sums import Design, Latent, Normal, PassCounter, run_lockstep
from .gaussian_draw import draw_from_precision

ProgressFn = Callable[[float], object] | None


def gibbs_by_sums(
    t: int,
    *,
    alpha: float,
    nu: float,
    learn_nu: bool,
    a_nu: float,
    b_nu: float,
    n_draws: int,
    burn_in: int,
    thin: int,
    penalised: np.ndarray,
    seed: int,
    n_chains: int,
    overrelax: float = OVERRELAX,
    progress: ProgressFn = None,
) -> Any:
    """C chains of problem t in lockstep; returns ``run_gibbs_chains``'s dict (module docstring)."""
    pen = np.asarray(penalised, dtype=bool)
    k, C, n_pen = pen.size, n_chains, int(pen.sum())
    rngs = [np.random.default_rng([seed, 0, t, c]) for c in range(C)]
    gram, total = yield Normal(t)  # λ⁻¹ = 1: X̃'X̃ and X̃'(1 + 1)
    grams, rhos = np.repeat(gram[None], C, axis=0), np.repeat(2.0 * total[None], C, axis=0)
    sweeps = burn_in + n_draws * thin
    report = ProgressReporter(progress, sweeps)
    beta_draws, nu_draws, rb_sum = (
        np.empty((C, n_draws, k)),
        np.empty((C, n_draws)),
        np.zeros((C, k)),
    )
    nus = np.full(C, float(nu))
    gaussian = alpha in (1.0, 2.0)
    precision = np.zeros((C, k))
    precision[:, pen] = (0.5 if alpha == 1.0 else 2.0) / nu**2
    betas = np.repeat(np.linalg.solve(gram + np.eye(k), total)[None], C, axis=0)  # bridge start
    u = np.array([np.abs(betas[c, pen] / nu) ** alpha + rngs[c].standard_exponential(n_pen)
                  for c in range(C)])  # fmt: skip
    keep = np.sqrt(1.0 - overrelax * overrelax)
    previous = None
    for sweep in range(1, sweeps + 1):
        b = np.empty((C, k))
        for c, rng in enumerate(rngs):
            if gaussian:
                Q = grams[c].copy()
                Q[np.diag_indices(k)] += precision[c]
                betas[c], b[c] = draw_from_precision(Q, rhos[c], rng.standard_normal(k))
            else:
                bound = np.full(k, np.inf)
                bound[pen] = nus[c] * u[c] ** (1.0 / alpha)
                _sweep_coordinates(betas[c], grams[c], rhos[c], bound, rng)
                b[c] = betas[c]
        if gaussian and previous is not None and overrelax != 0.0:
            betas = b + overrelax * (previous - b) + keep * (betas - b)
        previous = betas.copy()
        for c, rng in enumerate(rngs):
            if learn_nu:  # τ | β ~ Gamma(a_ν + k/α, rate b_ν + Σ|β_j|^α), §3.5
                s = float(np.sum(np.abs(betas[c, pen]) ** alpha))
                nus[c] = float(rng.gamma(a_nu + n_pen / alpha, 1.0 / (b_nu + s))) ** (-1 / alpha)
            if alpha == 1.0:  # ω_j⁻¹ | β_j, ν ~ IG(ν/|β_j|, 1), §3.3; prior precision ω⁻¹/ν²
                precision[c, pen] = wald_inverse_mean(np.abs(betas[c, pen]) / nus[c], 1.0, rng)
                precision[c, pen] /= nus[c] ** 2
            elif alpha == 2.0:
                precision[c, pen] = 2.0 / nus[c] ** 2
            else:  # u_j | β_j, ν = |β_j/ν|^α + Exp(1), §3.4
                u[c] = np.abs(betas[c, pen] / nus[c]) ** alpha + rng.standard_exponential(n_pen)
        kept = sweep - burn_in
        if kept > 0:
            rb_sum += b
            if kept % thin == 0:
                beta_draws[:, kept // thin - 1] = betas
                nu_draws[:, kept // thin - 1] = nus
        report(sweep)
        if sweep < sweeps:
            grams, rhos = yield Latent(t, betas.copy(), seed, sweep)
    return {"beta_draws": beta_draws, "beta_rb": rb_sum / (n_draws * thin), "nu_draws": nu_draws}


def gibbs_by_partitions(
    parts: RowPartitions,
    design: Design,
    *,
    seed: int,
    n_chains: int,
    progress: list[ProgressFn] | None = None,
    counter: PassCounter | None = None,
    **options: Any,
) -> list[dict[str, np.ndarray]]:
    """Chains of every problem of ``design``, one pass per sweep for all of them.

    ``options`` are ``gibbs_by_sums``'s (α, ν, learn_nu, a_ν, b_ν, n_draws, burn_in, thin,
    penalised, overrelax). Returns per problem the dict of ``run_gibbs_chains``: ``beta_draws``
    (C, n_draws, k), ``beta_rb`` (C, k), ``nu_draws`` (C, n_draws).
    """
    solvers = [
        gibbs_by_sums(
            t, seed=seed, n_chains=n_chains,
            progress=None if progress is None else progress[t], **options,
        )
        for t in range(len(design.labels))
    ]  # fmt: skip
    return run_lockstep(parts, design, solvers, counter or PassCounter())
