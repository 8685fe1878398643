"""Exact draw of a flat-prior intercept from its conditional with the latent λ integrated out.

With the other coefficients w fixed, the Polson-Scott pseudo-posterior (bayes-svm.md §1.1) as a
function of the intercept b (column aᵢ = yᵢ = ±1 of X̃, flat prior) is

    p(b | w, y) ∝ exp{−2 Σᵢ max(rᵢ(b), 0)},   rᵢ(b) = aᵢ(tᵢ − b),   tᵢ = b₀ + aᵢ rᵢ(b₀)

for any reference b₀ (the current value).  A row with aᵢ = +1 adds slope +2 to log p left of its
breakpoint tᵢ, a row with aᵢ = −1 adds slope −2 right of it.  Between the k-th and (k+1)-th
smallest breakpoints the slope is therefore 2(#{aᵢ = +1, tᵢ > b} − #{aᵢ = −1, tᵢ < b}) = 2(n₊ − k),
whatever the labels of the first k: log p is concave and piecewise linear, flat between the n₊-th
and (n₊+1)-th breakpoints, and its tails decay at rates 2n₊ and 2n₋ (proper when both signs
occur, §1.3).  The draw sorts the n breakpoints, gives each of the n + 1 pieces its exact mass,
picks a piece with one uniform and draws inside it with another (a truncated exponential by
inversion, taken from the piece's higher end so that nothing overflows): O(n log n), exact.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def flat_column(Xt: NDArray[np.float64], penalised: NDArray[np.bool_]) -> int | None:
    """Index of the first unpenalised column of X̃ whose entries are all ±1 with both signs
    (an intercept column yᵢ), or None."""
    for j in np.flatnonzero(~penalised):
        col = Xt[:, j]
        if np.all(np.abs(col) == 1.0) and np.any(col > 0) and np.any(col < 0):
            return int(j)
    return None


class InterceptDraw:
    """Batched exact draws of b ~ p(b | w, y) ∝ exp{−2 Σ max(aᵢ(tᵢ − b), 0)} (module docstring)."""

    def __init__(self, signs: NDArray[np.float64]) -> None:
        n = signs.size
        n_pos = int(np.sum(signs > 0))
        if not 0 < n_pos < n:
            raise ValueError("the intercept column needs both signs (both classes)")
        self.signs = signs
        self.n_pos = n_pos
        self.slope = 2.0 * (n_pos - np.arange(n + 1))  # of log p on piece k, [t₍ₖ₎, t₍ₖ₊₁₎]
        self.inner_slope = self.slope[1:n]
        with np.errstate(divide="ignore"):
            self.inv_slope = np.where(self.slope == 0.0, 0.0, 1.0 / self.slope)

    def breakpoints(
        self, b: NDArray[np.float64], residual: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """tᵢ = b + aᵢ rᵢ for C chains: b (C,), residuals rᵢ = 1 − x̃ᵢ'β (C, n)."""
        t = residual * self.signs
        t += b[:, np.newaxis]
        return t

    def draw(self, t: NDArray[np.float64], u: NDArray[np.float64]) -> NDArray[np.float64]:
        """New intercepts (C,) given breakpoints t (C, n) and uniforms u (C, 2) in [0, 1).

        Piece k of log-slope s between sorted breakpoints with densities P₋ and P₊ has mass
        (P₊ − P₋)/s (P·width when s = 0; P/|s| for a tail): one exp per breakpoint.
        """
        C, n = t.shape
        m = self.n_pos
        ts = np.sort(t, axis=1)
        gap = np.subtract(ts[:, 1:], ts[:, :-1])
        log_p = np.empty((C, n))  # log p at the sorted breakpoints, up to a constant
        log_p[:, 0] = 0.0
        np.cumsum(gap * self.inner_slope, axis=1, out=log_p[:, 1:])
        log_p -= log_p[:, m - 1 : m]  # the maximum: the flat piece lies between m − 1 and m
        p = np.exp(log_p, out=log_p)
        mass = np.empty((C, n + 1))
        np.subtract(p[:, 1:], p[:, :-1], out=mass[:, 1:n])
        mass *= self.inv_slope
        mass[:, 0] = p[:, 0] * self.inv_slope[0]
        mass[:, n] = -p[:, n - 1] * self.inv_slope[n]
        mass[:, m] = gap[:, m - 1]  # p = 1 on the flat piece
        cum = np.cumsum(mass, axis=1, out=mass)
        target = u[:, 0] * cum[:, n]
        piece = np.array([np.searchsorted(cum[c], target[c], side="right") for c in range(C)])
        np.minimum(piece, n, out=piece)
        rows = np.arange(C)
        lower = ts[rows, np.maximum(piece - 1, 0)]  # piece k spans [ts[k − 1], ts[k]]
        upper = ts[rows, np.minimum(piece, n - 1)]
        width = np.where((piece == 0) | (piece == n), np.inf, upper - lower)
        slope = self.slope[piece]
        rate = np.abs(slope)
        with np.errstate(invalid="ignore", divide="ignore"):  # rate 0 (the flat piece): uniform
            into = np.where(
                rate > 0.0, -np.log1p(u[:, 1] * np.expm1(-rate * width)) / rate, u[:, 1] * width
            )  # a truncated exponential, measured from the piece's higher end
        return np.where(slope > 0.0, upper - into, lower + into)
