"""An rbf KernelSVM's decision matrix and its error bound, with an affine scaling folded in.

For rows scaled as z = (x − μ) / σ before the model (a ``StandardScaler``: μ its mean, σ its
scale; none: μ = 0, σ = 1), and c the support vectors' mean (``rbf_scoring``), the centred row is

    x̃ = z − c = (x − p) ⊙ r,   p = μ + σ ⊙ c,   r = 1 / σ,

so the scaling costs one subtraction and one product, both of which the centring needed anyway.
With s̃ = s − c the centred support vectors, the exponents a = −γ‖x̃ − s̃‖² come from one product

    a = [x̃, ‖x̃‖², 1] · [2γ s̃, −γ, −γ‖s̃‖²]ᵀ,   D(x) = Σ_s eᵃ W_s + b   (one column per problem),

the same terms as ``rbf_scoring.rbf_product``'s in another order: a handful of numpy calls for any
number of rows. D differs from ``KernelSVM._decision_matrix``'s by rounding only, within
``tie`` per column (``row_plans.TIE_BOUND`` times the scale of the terms, far beyond both
computations' rounding). From ``rbf_scoring.FLOAT32_MIN_ENTRIES`` kernel entries, labels may
take eᵃ in float32 (``rbf_scoring.exp_float32``), whose error bound widens it (``tie32``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import rbf_scoring
from .rbf_scoring import FLOAT32_MIN_ENTRIES, decision_error_bound, exp_float32
from .row_plans import TIE_BOUND


@dataclass(frozen=True, eq=False)
class RbfRows:
    """The folded terms of a fitted rbf model (module docstring)."""

    shift: np.ndarray
    """p = μ + σ ⊙ c, (d,)."""
    inv_scale: np.ndarray | None
    """r = 1 / σ, (d,); None when σ = 1."""
    right: np.ndarray
    """[2γ s̃, −γ, −γ‖s̃‖²]ᵀ, (d + 2, m)."""
    coef: np.ndarray
    """W, (m, p)."""
    intercept: np.ndarray
    """b, (p,)."""
    tie: np.ndarray
    """Bound on |D − the estimator's D| per column, (p,)."""
    tie32: np.ndarray
    """The same with the kernel's exp taken in float32 (plus ``rbf_scoring``'s error bound)."""
    first: tuple[np.ndarray, float, float] = field(init=False, repr=False)
    """(W's first column, b₀, ``tie``₀): the first problem's terms, for ``margin``."""

    def __post_init__(self) -> None:
        first = (
            np.ascontiguousarray(self.coef[:, 0]),
            float(self.intercept[0]),
            float(self.tie[0]),
        )
        object.__setattr__(self, "first", first)

    @property
    def width(self) -> int:
        """Kernel entries per row (support vectors)."""
        return self.coef.shape[0]

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

    def row_exponents(self, x: np.ndarray) -> np.ndarray:
        """a of one raw row x (d,) and every support vector, (m,): ``exponents`` of one row, in
        fewer calls."""
        d = x.shape[0]
        left = np.empty(d + 2)
        v = np.subtract(x, self.shift, out=left[:d])
        if self.inv_scale is not None:
            v *= self.inv_scale
        left[d] = np.dot(v, v)
        left[d + 1] = 1.0
        return np.dot(left, self.right)

    def row(self, x: np.ndarray) -> np.ndarray:
        """D(x) (p,) of one raw row x (d,): ``scores`` of one row, in fewer calls."""
        a = self.row_exponents(x)
        f = np.dot(np.exp(a, out=a), self.coef)
        f += self.intercept
        return f

    def margin(self, x: np.ndarray, bound: bool = True) -> tuple[float, float]:
        """(D(x)₀, its bound ``tie``₀) of one raw row x (d,): ``row``'s first column, as floats,
        in fewer calls (two classes; the bound whatever ``bound``)."""
        a = self.row_exponents(x)
        coef, intercept, tie = self.first
        return float(np.dot(np.exp(a, out=a), coef)) + intercept, tie

    def row_scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D(x), ``tie``) (p,) each of one raw row x (d,)."""
        return self.row(x), self.tie

    def scores(self, X: np.ndarray, screen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(D (n, p), its error bound per column (p,)) of every row of X (n, d); ``screen``: eᵃ
        may be taken in float32 (labels only), the bound widened to ``tie32``."""
        A = self.exponents(X)
        if screen and rbf_scoring.FLOAT32_SCREEN and A.size >= FLOAT32_MIN_ENTRIES:
            tie = self.tie32
            exp_float32(A)
        else:
            tie = self.tie
            np.exp(A, out=A)
        one = self.coef.shape[1] == 1  # one problem: a product with a vector (gemv)
        D = np.dot(A, self.first[0])[:, None] if one else np.dot(A, self.coef)
        D += self.intercept
        return D, tie


def rbf_rows(
    center: np.ndarray,
    centred: np.ndarray,
    gamma: float,
    coef: np.ndarray,
    intercept: np.ndarray,
    mean: np.ndarray | None = None,
    scale: np.ndarray | None = None,
) -> RbfRows | None:
    """The plan of support vectors ``centred`` = S − ``center`` (m, d) with dual coefficients
    ``coef`` (m, p) and ``intercept`` (p,), behind the scaling (x − ``mean``) / ``scale``; None
    without support vectors."""
    d = center.shape[0]
    if not centred.shape[0]:
        return None
    W = np.array(coef, dtype=np.float64).reshape(centred.shape[0], -1)
    b = np.array(intercept, dtype=np.float64).reshape(-1)
    sq = np.einsum("ij,ij->i", centred, centred)
    sigma = np.ones(d) if scale is None else np.asarray(scale, dtype=np.float64)
    mu = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64)
    right = np.empty((d + 2, centred.shape[0]))
    right[:d] = 2.0 * gamma * centred.T
    right[d] = -gamma
    right[d + 1] = -gamma * sq
    offset = float(np.linalg.norm(mu / sigma + center))
    scale_of_f = np.abs(W).sum(axis=0) * (1.0 + gamma * (float(sq.max()) + offset**2))
    tie = TIE_BOUND * (scale_of_f + np.abs(b))
    return RbfRows(
        shift=mu + sigma * center,
        inv_scale=None if scale is None else 1.0 / sigma,
        right=right,
        coef=W,
        intercept=b,
        tie=tie,
        tie32=tie + decision_error_bound(W),
    )
