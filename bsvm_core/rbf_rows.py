"""A binary rbf KernelSVM's decision values on a few rows, with an affine scaling folded in.

For rows scaled as z = (x − μ) / σ before the model (a ``StandardScaler``: μ its mean, σ its
scale; none: μ = 0, σ = 1), and c the support vectors' mean (``rbf_scoring``), the centred row is

    x̃ = z − c = (x − p) ⊙ r,   p = μ + σ ⊙ c,   r = 1 / σ,

so the scaling costs one subtraction and one product, both of which the centring needed anyway.
With s̃ = s − c the support vectors centred and scaled, the decision value is

    f(x) = Σ_s w_s exp(−γ‖x̃ − s̃‖²) + b = Σ_s w'_s exp(2γ x̃·s̃ − γ‖x̃‖²) + b,
    w'_s = w_s exp(−γ‖s̃‖²),

whose exponents come from one product [x̃, ‖x̃‖²] · [2γ s̃, −γ]ᵀ: eight numpy calls for any number
of rows, against twice as many (and their Python) through ``KernelSVM.predict``. The exponent
2γ x̃·s̃ − γ‖x̃‖² = γ(‖s̃‖² − ‖x̃ − s̃‖²) is at most γ‖s̃‖², so a plan is made only when that stays
far from exp's overflow (``MAX_EXPONENT``).

The values differ from ``KernelSVM.decision_function``'s by rounding only: both take the same
exponents by a product of the same terms, in another order. A label is the sign of the decision
value; where |f| is within ``TIE_BOUND`` (far beyond both computations' rounding) of a tie the
label is left to the estimator (``RbfRows.unsure``), so labels are always the estimator's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_EXPONENT = 300.0
"""Largest γ‖s̃‖² a plan takes: exp of the exponents (≤ γ‖s̃‖²) is then far below overflow."""
TIE_BOUND = 2.0**-30
"""Relative width of the band around a tie in which labels are left to the estimator (rounding
moves a decision value by about (d + m) 2⁻⁵³ times the same scale)."""


@dataclass(frozen=True, eq=False)
class RbfRows:
    """The folded terms of a fitted binary rbf model (module docstring)."""

    shift: np.ndarray
    """p = μ + σ ⊙ c, (d,)."""
    inv_scale: np.ndarray | None
    """r = 1 / σ, (d,); None when σ = 1."""
    right: np.ndarray
    """[2γ s̃, −γ]ᵀ, (d + 1, m)."""
    coef: np.ndarray
    """w'_s = w_s exp(−γ‖s̃‖²), (m,)."""
    intercept: float
    tie: float
    """|f| at most this is too near a tie to give a label from (``TIE_BOUND`` × the scale)."""

    def decisions(self, X: np.ndarray) -> np.ndarray:
        """f(x) of every row of the raw float64 matrix X (n, d): module docstring's formula."""
        n, d = X.shape
        if n == 1:
            return np.array([self.decision(X[0])])
        left = np.empty((n, d + 1))
        V = np.subtract(X, self.shift, out=left[:, :d])
        if self.inv_scale is not None:
            V *= self.inv_scale
        np.einsum("ij,ij->i", V, V, out=left[:, d])
        A = np.dot(left, self.right)
        np.exp(A, out=A)
        f = np.dot(A, self.coef)
        f += self.intercept
        return f

    def decision(self, x: np.ndarray) -> float:
        """f(x) of one raw row x (d,): ``decisions`` of one row, in fewer calls."""
        d = x.shape[0]
        left = np.empty(d + 1)
        v = np.subtract(x, self.shift, out=left[:d])
        if self.inv_scale is not None:
            v *= self.inv_scale
        left[d] = np.dot(v, v)
        a = np.dot(left, self.right)
        np.exp(a, out=a)
        return float(np.dot(a, self.coef)) + self.intercept

    def unsure(self, f: np.ndarray) -> bool:
        """Whether a decision value of ``f`` is too near 0 for its sign to be the estimator's."""
        return bool(np.abs(f).min() <= self.tie) if f.size else False


def rbf_rows(
    center: np.ndarray,
    centred: np.ndarray,
    gamma: float,
    coef: np.ndarray,
    intercept: float,
    mean: np.ndarray | None = None,
    scale: np.ndarray | None = None,
) -> RbfRows | None:
    """The plan of support vectors ``centred`` = S − ``center`` (m, d) with dual coefficients
    ``coef`` (m,) and ``intercept``, behind the scaling (x − ``mean``) / ``scale``; None when
    γ‖s̃‖² exceeds ``MAX_EXPONENT`` (or there are no support vectors)."""
    d = center.shape[0]
    sq = np.einsum("ij,ij->i", centred, centred)
    if not centred.shape[0] or gamma * float(sq.max()) > MAX_EXPONENT:
        return None
    sigma = np.ones(d) if scale is None else np.asarray(scale, dtype=np.float64)
    mu = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64)
    right = np.empty((d + 1, centred.shape[0]))
    right[:d] = 2.0 * gamma * centred.T
    right[d] = -gamma
    folded = coef * np.exp(-gamma * sq)
    offset = float(np.linalg.norm(mu / sigma + center))
    scale_of_f = float(np.abs(coef).sum()) * (1.0 + gamma * (float(sq.max()) + offset**2))
    return RbfRows(
        shift=mu + sigma * center,
        inv_scale=None if scale is None else 1.0 / sigma,
        right=right,
        coef=folded,
        intercept=float(intercept),
        tie=TIE_BOUND * (scale_of_f + abs(float(intercept))),
    )
