"""Random variates the Bayesian SVM samplers need and numpy does not provide stably.

* :func:`wald_stable` / :func:`wald_inverse_mean` - inverse-Gaussian (Wald) draws for any mean in
  (0, inf], including the infinite-mean (Lévy) limit that ``numpy.random.Generator.wald`` cannot
  handle; :func:`wald_root_from_variates` is the square root of the same map applied to given
  normals and uniforms.
* :func:`truncated_normal` - normal draws truncated to an interval, accurate far in the tails.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special


def wald_root_from_variates(
    inv_mean: NDArray[np.float64],
    shape: float | NDArray[np.float64],
    z: NDArray[np.float64],
    u: NDArray[np.float64],
) -> NDArray[np.float64]:
    """√X, X ~ IG(mean 1/inv_mean, shape), from z ~ N(0, 1), u ~ U(0, 1); MSH (1976), §3.2.

    The small root of the Michael-Schucany-Haas quadratic, x = 4sz²/(z² + sqrt(z⁴ + 4sz²/μ))²,
    is x = h² with h = 2√s/(|z| + sqrt(z² + 4s/μ)) (no cancellation, no 0/0); X = x when
    u(1 + x/μ) ≤ 1, else μ²/x, whose root is μ/h = 1/(h/μ).  Taking 1/μ ≥ 0 as input (0: the Lévy
    limit, never rejected) avoids forming huge or infinite means.
    """
    h = np.multiply(z, z)
    t = np.multiply(inv_mean, 4.0 * shape)
    h += t
    np.sqrt(h, out=h)
    np.abs(z, out=t)
    h += t
    np.divide(2.0 * np.sqrt(shape), h, out=h)
    np.multiply(h, h, out=t)
    t *= inv_mean  # x/μ
    t += 1.0
    t *= u
    reject = t > 1.0
    np.multiply(h, inv_mean, out=t)
    return np.divide(1.0, t, out=h, where=reject)


def wald_inverse_mean(
    inv_mean: NDArray[np.float64], shape: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """IG(mean 1/inv_mean, shape) draws, inv_mean ≥ 0 (0: the Lévy limit); MSH (1976), §3.2."""
    inv_mean = np.asarray(inv_mean, dtype=np.float64)
    z = rng.standard_normal(inv_mean.shape)
    root = wald_root_from_variates(inv_mean, shape, z, rng.random(inv_mean.shape))
    return np.multiply(root, root, out=root)


def wald_stable(mean: ArrayLike, shape: ArrayLike, rng: np.random.Generator) -> NDArray[np.float64]:
    """Inverse-Gaussian IG(mean, shape) draws; Michael, Schucany & Haas (1976), bayes-svm.md §3.2.

    Exact for every mean in (0, inf], where ``numpy.random.Generator.wald`` fails beyond about
    1e10; for ``mean = inf`` the law is Lévy, ``shape / Z**2`` with Z standard normal.

    Parameters
    ----------
    mean : array_like
        Means, each in (0, inf].
    shape : array_like
        Shape parameters (numpy's ``scale`` of ``wald``), each > 0.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    ndarray of float64
        One draw per element of ``np.broadcast(mean, shape)``.
    """
    mean = np.asarray(mean, dtype=np.float64)
    shape = np.asarray(shape, dtype=np.float64)
    mean, shape = np.broadcast_arrays(mean, shape)
    with np.errstate(divide="ignore"):
        inv_mean = 1.0 / mean
    return wald_inverse_mean(inv_mean, shape, rng)


def truncated_normal(
    mean: ArrayLike,
    sd: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """N(mean, sd²) truncated to (lower, upper) by inversion in log space (tail-stable).

    When the interval lies in one tail, the CDF is inverted from that tail with
    ``log_ndtr``/``ndtri_exp``, so intervals 40 sd from the mean are still sampled exactly.

    Parameters
    ----------
    mean, sd : array_like
        Location and scale (sd > 0) of the untruncated normal.
    lower, upper : array_like
        Truncation bounds, ``lower < upper``; ``-inf``/``inf`` allowed.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    ndarray of float64
        One draw per element of the broadcast inputs.
    """
    mean, sd, lower, upper = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (mean, sd, lower, upper))
    )
    a = (lower - mean) / sd
    b = (upper - mean) / sd
    u = rng.random(a.shape)
    u[u == 0.0] = 0.5  # keep u in (0, 1): u = 0 would return an infinite bound
    # Work in the tail the interval lies in: flip so that the interval is left of 0 when b < 0
    # or right of 0 when a > 0; mirror x -> -x maps the upper tail to the lower one.
    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)  # now lo < hi and, if in a tail, both are in the lower one
    log_lo = special.log_ndtr(lo)
    log_hi = special.log_ndtr(hi)
    # log Phi(x) uniform between log_lo and log_hi in probability: Phi(x) = Phi(lo) + u (Phi(hi)-Phi(lo))
    with np.errstate(divide="ignore"):
        log_p = log_hi + np.log(u + (1.0 - u) * np.exp(log_lo - log_hi))
    x = special.ndtri_exp(log_p)
    x = np.clip(x, lo, hi)
    z = np.where(flip, -x, x)
    return mean + sd * z
