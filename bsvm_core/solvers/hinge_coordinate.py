"""Exact draws of one coefficient from the SVM pseudo-posterior with the latent λ integrated out.

Given the other coefficients, the pseudo-posterior of βⱼ with λ integrated out (and a flat prior)
is f(x) ∝ exp{−2 Σᵢ max(0, cᵢ − aᵢx)}, aᵢ = x̃ᵢⱼ and cᵢ = 1 − Σ_{l≠j} x̃ᵢₗβₗ (bayes-svm.md §1.1,
§2.1).  log f is concave and piecewise linear with a kink at each tᵢ = cᵢ/aᵢ, so f is a mixture of
exponential pieces: pick a piece with probability ∝ its mass, then invert its CDF.  A Laplace
prior exp(−|x|/ν) is two more such terms, c = 0 and a = ±1/(2ν).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def _log_piece_mass(slope: NDArray[np.float64], width: NDArray[np.float64]) -> NDArray[np.float64]:
    """log ∫₀^w e^{sx} dx = log((e^{sw} − 1)/s), stable for any s (w ≥ 0; −inf for w = 0)."""
    sw = np.abs(slope) * width
    small = sw < 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        big = np.maximum(slope * width, 0.0) + np.log(-np.expm1(-sw)) - np.log(np.abs(slope))
        return np.where(small, np.log(width), big)


def draw_hinge_coordinate(
    a: NDArray[np.float64], c: NDArray[np.float64], rng: np.random.Generator
) -> float:
    """x ~ f(x) ∝ exp{−2 Σᵢ max(0, cᵢ − aᵢx)}, aᵢ ≠ 0 of both signs (so that f is proper)."""
    t = c / a
    order = np.argsort(t)
    t = t[order]
    drop = 2.0 * np.abs(a[order])  # the slope of log f falls by 2|aᵢ| past each kink
    slope = np.empty(t.size + 1)
    slope[0] = 2.0 * np.sum(a[a > 0.0])
    np.subtract(slope[0], np.cumsum(drop), out=slope[1:])
    width = np.diff(t)
    log_f = np.empty(t.size)  # log f at the kinks, up to a constant
    log_f[0] = -2.0 * np.sum(np.maximum(0.0, c - a * t[0]))
    np.cumsum(slope[1:-1] * width, out=log_f[1:])
    log_f[1:] += log_f[0]
    log_mass = np.empty(t.size + 1)
    log_mass[0] = log_f[0] - np.log(slope[0])
    log_mass[-1] = log_f[-1] - np.log(-slope[-1])
    log_mass[1:-1] = log_f[:-1] + _log_piece_mass(slope[1:-1], width)
    piece = int(np.argmax(log_mass + rng.gumbel(size=log_mass.size)))  # Gumbel-max: ∝ mass
    u = rng.random()
    s = slope[piece]
    if piece == 0:
        return float(t[0] + np.log(u) / s)  # e^{s(x − t₀)} on (−∞, t₀)
    if piece == t.size:
        return float(t[-1] + np.log(u) / s)  # s < 0 on (t_last, ∞)
    left, w = t[piece - 1], width[piece - 1]
    if abs(s) * w < 1e-12:
        return float(left + u * w)
    # inverse CDF of e^{s(x − left)} on [left, left + w], written to avoid overflow for s > 0
    if s > 0.0:
        return float(left + w + np.log(u + (1.0 - u) * np.exp(-s * w)) / s)
    return float(left + np.log1p(-u * -np.expm1(s * w)) / s)
