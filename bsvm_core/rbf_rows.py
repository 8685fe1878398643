"""A binary rbf KernelSVM's decision values and labels, with an affine scaling folded in.

For rows scaled as z = (x − μ) / σ before the model (a ``StandardScaler``: μ its mean, σ its
scale; none: μ = 0, σ = 1), and c the support vectors' mean (``rbf_scoring``), the centred row is

    x̃ = z − c = (x − p) ⊙ r,   p = μ + σ ⊙ c,   r = 1 / σ,

so the scaling costs one subtraction and one product, both of which the centring needed anyway.
With s̃ = s − c the centred support vectors, the exponents a = −γ‖x̃ − s̃‖² come from one product

    a = [x̃, ‖x̃‖², 1] · [2γ s̃, −γ, −γ‖s̃‖²]ᵀ,   f(x) = Σ_s w_s eᵃ + b,

the same terms as ``rbf_scoring.rbf_product``'s in another order: a handful of numpy calls for any
number of rows, against twice as many (and their Python) through a pipeline and
``KernelSVM.predict``. Decision values thus differ from ``KernelSVM.decision_function``'s by
rounding only. A label is the sign of f; where |f| is within ``TIE_BOUND`` of a tie (far beyond
both computations' rounding) the label is left to the estimator (``RbfRows.labels``' ``unsure``),
so labels are always the estimator's. From ``rbf_scoring.FLOAT32_MIN_ENTRIES`` kernel entries labels
take eᵃ in float32 (``rbf_scoring.exp_float32``), whose error bound widens that band.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import rbf_scoring
from .rbf_scoring import FLOAT32_MIN_ENTRIES, decision_error_bound, exp_float32

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
    """[2γ s̃, −γ, −γ‖s̃‖²]ᵀ, (d + 2, m)."""
    coef: np.ndarray
    """w, (m,)."""
    intercept: float
    tie: float
    """|f| at most this is too near a tie to give a label from (``TIE_BOUND`` × the scale)."""
    tie32: float
    """The same with the kernel's exp taken in float32 (plus ``rbf_scoring``'s error bound)."""

    def exponents(self, X: np.ndarray) -> np.ndarray:
        """a of every row of the raw float64 matrix X (n, d) and support vector, (n, m)."""
        n, d = X.shape
        left = np.empty((n, d + 2))
        V = np.subtract(X, self.shift, out=left[:, :d])
        if self.inv_scale is not None:
            V *= self.inv_scale
        np.einsum("ij,ij->i", V, V, out=left[:, d])
        left[:, d + 1] = 1.0
        return np.dot(left, self.right)

    def decisions(self, X: np.ndarray) -> np.ndarray:
        """f(x) of every row of X (n, d): module docstring's formula."""
        if X.shape[0] == 1:
            return np.array([self.decision(X[0])])
        A = self.exponents(X)
        f = np.dot(np.exp(A, out=A), self.coef)
        f += self.intercept
        return f

    def decision(self, x: np.ndarray) -> float:
        """f(x) of one raw row x (d,): ``decisions`` of one row, in fewer calls."""
        d = x.shape[0]
        left = np.empty(d + 2)
        v = np.subtract(x, self.shift, out=left[:d])
        if self.inv_scale is not None:
            v *= self.inv_scale
        left[d] = np.dot(v, v)
        left[d + 1] = 1.0
        a = np.dot(left, self.right)
        return float(np.dot(np.exp(a, out=a), self.coef)) + self.intercept

    def labels(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(f(x) > 0, unsure) of every row of X (n, d): ``unsure`` marks the rows whose f is
        too near 0 for that sign to be the estimator's (``tie``, or ``tie32`` where eᵃ was taken
        in float32)."""
        A = self.exponents(X)
        if rbf_scoring.FLOAT32_SCREEN and A.size >= FLOAT32_MIN_ENTRIES:
            tie = self.tie32
            exp_float32(A)
        else:
            tie = self.tie
            np.exp(A, out=A)
        f = np.dot(A, self.coef)
        f += self.intercept
        return f > 0, ~(np.abs(f) > tie)  # NaN (overflowed rows) unsure too


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
    ``coef`` (m,) and ``intercept``, behind the scaling (x − ``mean``) / ``scale``; None without
    support vectors."""
    d = center.shape[0]
    if not centred.shape[0]:
        return None
    sq = np.einsum("ij,ij->i", centred, centred)
    sigma = np.ones(d) if scale is None else np.asarray(scale, dtype=np.float64)
    mu = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64)
    right = np.empty((d + 2, centred.shape[0]))
    right[:d] = 2.0 * gamma * centred.T
    right[d] = -gamma
    right[d + 1] = -gamma * sq
    offset = float(np.linalg.norm(mu / sigma + center))
    scale_of_f = float(np.abs(coef).sum()) * (1.0 + gamma * (float(sq.max()) + offset**2))
    tie = TIE_BOUND * (scale_of_f + abs(float(intercept)))
    return RbfRows(
        shift=mu + sigma * center,
        inv_scale=None if scale is None else 1.0 / sigma,
        right=right,
        coef=np.array(coef, dtype=np.float64),
        intercept=float(intercept),
        tie=tie,
        tie32=tie + float(decision_error_bound(np.asarray(coef)[:, None])[0]),
    )
