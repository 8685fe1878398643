"""Judging MCMC output: per-coefficient R-hat and bulk ESS against the thresholds of Vehtari et al.

Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), Bayesian Analysis 16(2), §4: use the
sample only when the rank-normalised split R-hat is below 1.01 and the bulk effective sample size
is at least 100 (about 25 per chain for four chains), for every quantity of interest.
"""

from __future__ import annotations

import numpy as np

from .diagnostics import ess_bulk, rhat_rank

RHAT_MAX = 1.01
"""Largest acceptable rank-normalised split R-hat (Vehtari et al. 2021 recommend 1.01)."""

ESS_MIN = 100.0
"""Smallest acceptable bulk effective sample size (Vehtari et al. 2021)."""

MIN_DRAWS = 8
"""Draws per chain below which split R-hat and ESS are undefined (4 per half-chain)."""

SHOWN = 5
"""Coefficients named in a warning message; the rest are counted."""


def chain_diagnostics(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R-hat and bulk ESS of every coefficient of draws (..., chains, n_draws, k): (..., k) each.

    NaN where they are undefined: fewer than ``MIN_DRAWS`` draws per chain (split chains need
    4 each), or draws that never move.
    """
    lead = draws.shape[:-3]
    rhat = np.full((*lead, draws.shape[-1]), np.nan)
    ess = np.full_like(rhat, np.nan)
    if draws.shape[-2] < MIN_DRAWS:
        return rhat, ess
    for idx in np.ndindex(*lead, draws.shape[-1]):
        chains = draws[(*idx[:-1], Ellipsis, idx[-1])]
        if np.ptp(chains) > 0:
            rhat[idx], ess[idx] = rhat_rank(chains), ess_bulk(chains)
    return rhat, ess


def convergence_message(names: list[str], rhat: np.ndarray, ess: np.ndarray) -> str | None:
    """Describe the coefficients over ``RHAT_MAX`` or under ``ESS_MIN``; None when all pass.

    ``names``, ``rhat`` and ``ess`` are flat and aligned; NaN entries are not judged.
    """
    parts = []
    for label, values, bad, fmt in (
        (f"R-hat > {RHAT_MAX}", rhat, rhat > RHAT_MAX, "{:.3g}"),
        (f"bulk ESS < {ESS_MIN:.0f}", ess, ess < ESS_MIN, "{:.0f}"),
    ):
        where = np.flatnonzero(bad)
        if where.size == 0:
            continue
        worst = where[np.argsort(-values[where] if label.startswith("R") else values[where])]
        shown = ", ".join(f"{names[i]} ({fmt.format(values[i])})" for i in worst[:SHOWN])
        more = f" and {where.size - SHOWN} more" if where.size > SHOWN else ""
        parts.append(f"{label} for {shown}{more}")
    if not parts:
        return None
    return (
        "MCMC has not converged: "
        + "; ".join(parts)
        + ". Increase n_draws and burn_in (or n_chains) and refit."
    )
