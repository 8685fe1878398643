"""MCMC convergence diagnostics of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021).

Rank-normalised split R-hat and bulk effective sample size, "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2).
Every function takes ``draws`` of shape ``(chains, draws)`` for one scalar quantity.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats


def _as_chains(draws: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(draws, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[np.newaxis, :]
    if arr.ndim != 2:
        raise ValueError(f"draws must have shape (chains, draws); got {arr.shape}")
    if arr.shape[1] < 4:
        raise ValueError(f"need at least 4 draws per chain; got {arr.shape[1]}")
    return arr


def split_chains(draws: ArrayLike) -> NDArray[np.float64]:
    """Split every chain into its first and last halves (middle draw dropped when odd); Vehtari §3."""
    arr = _as_chains(draws)
    half = arr.shape[1] // 2
    return np.concatenate([arr[:, :half], arr[:, -half:]], axis=0)


def rank_normalise(draws: ArrayLike) -> NDArray[np.float64]:
    """z = Φ⁻¹((r − 3/8)/(S + 1/4)) with r the pooled average ranks; Vehtari et al. (2021) eq. 14."""
    arr = np.asarray(draws, dtype=np.float64)
    ranks = stats.rankdata(arr, method="average").reshape(arr.shape)
    return special.ndtri((ranks - 0.375) / (arr.size + 0.25))


def autocovariance(x: ArrayLike) -> NDArray[np.float64]:
    """Biased autocovariance (divisor N) of each row for lags 0..N-1, by zero-padded FFT."""
    arr = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = arr.shape[1]
    centred = arr - arr.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    spec = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spec * np.conj(spec), n=size, axis=1)[:, :n] / n


def rhat_basic(draws: ArrayLike) -> float:
    """Potential scale reduction sqrt(var⁺/W) of the chains as given; Gelman et al. BDA3 eq. 11.4."""
    arr = _as_chains(draws)
    n = arr.shape[1]
    within = float(np.mean(np.var(arr, axis=1, ddof=1)))
    between_over_n = float(np.var(np.mean(arr, axis=1), ddof=1)) if arr.shape[0] > 1 else 0.0
    var_plus = (n - 1) / n * within + between_over_n
    if within <= 0.0:
        return float("nan") if var_plus <= 0.0 else float("inf")
    return float(np.sqrt(var_plus / within))


def ess_basic(draws: ArrayLike) -> float:
    """Multi-chain ESS with Geyer's initial monotone sequence; Vehtari et al. (2021) eqs. 10-13."""
    arr = _as_chains(draws)
    m, n = arr.shape
    acov = autocovariance(arr)
    mean_var = float(np.mean(acov[:, 0])) * n / (n - 1.0)  # W
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus += float(np.var(arr.mean(axis=1), ddof=1))
    if var_plus <= 0.0:
        return float("nan")
    rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # rho_hat_t, t = 0..n-1
    rho[0] = 1.0
    # Geyer (1992): sum pairs P_t = rho_2t + rho_2t+1 while positive, made monotone non-increasing.
    n_pairs = n // 2
    pairs = rho[: 2 * n_pairs].reshape(n_pairs, 2).sum(axis=1)
    negative = np.flatnonzero(pairs <= 0.0)
    n_pos = int(negative[0]) if negative.size else n_pairs
    pairs = np.minimum.accumulate(pairs[:n_pos])
    tau = -1.0 + 2.0 * float(np.sum(pairs))
    tau = max(tau, 1.0 / np.log10(m * n))
    return float(m * n / tau)


def ess_bulk(draws: ArrayLike) -> float:
    """Bulk ESS: ESS of the rank-normalised split chains; Vehtari et al. (2021) §3.2."""
    return ess_basic(rank_normalise(split_chains(draws)))


def ess_tail(draws: ArrayLike, prob: float = 0.05) -> float:
    """Tail ESS: minimum ESS of the indicators of the prob and 1 − prob quantiles; Vehtari §3.2."""
    arr = split_chains(draws)
    lo, hi = np.quantile(arr, [prob, 1.0 - prob])
    return min(ess_basic((arr <= lo).astype(float)), ess_basic((arr <= hi).astype(float)))


def rhat_rank(draws: ArrayLike) -> float:
    """Rank-normalised split R-hat: max of bulk and folded R-hat; Vehtari et al. (2021) eq. 16."""
    split = split_chains(draws)
    bulk = rhat_basic(rank_normalise(split))
    folded = np.abs(split - np.median(split))
    tail = rhat_basic(rank_normalise(folded))
    return float(max(bulk, tail))


def mcse_mean(draws: ArrayLike) -> float:
    """Monte Carlo standard error of the mean, sd / sqrt(ESS) with the non-ranked ESS."""
    arr = _as_chains(draws)
    return float(np.std(arr, ddof=1) / np.sqrt(ess_basic(split_chains(arr))))
