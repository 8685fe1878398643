"""A poly or sigmoid KernelSVM's decision matrix of rows scaled as z = (x − μ) / σ: scaled once.

    D = k(z Sᵀ) W + b,   k(u) = (γu + c₀)^deg (poly) or tanh(γu + c₀) (sigmoid),

with z = (x − μ) ⊙ r, r = 1 / σ (the kernel of a scaled row does not fold into S: the scaling
costs one subtraction and one product). The rounding of u = z·s is at most (d + 2) 2⁻⁵³ a ‖s‖ with
a = ‖z‖ + ‖μ ⊙ r‖ (the scaling's own included), so with B = γ a max‖s‖ + |c₀| ≥ |γu + c₀|:
poly moves D by at most deg (d + m + 3) 2⁻⁵³ B^deg ‖W‖₁, sigmoid (tanh' ≤ 1, |k| ≤ 1) by
(d + m + 3) 2⁻⁵³ (1 + B) ‖W‖₁; E is ``TIE_BOUND`` times B^deg deg ‖W‖₁ (or (1 + B) ‖W‖₁) + |b|,
the largest over the columns (one bound per row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .row_plans import TIE_BOUND


def kernel_of_products(U: np.ndarray, kernel: str, gamma: float, degree: int, coef0: float) -> None:
    """k(u) = (γu + c₀)^deg or tanh(γu + c₀) in place, in ``kernels``' own order of operations."""
    U *= gamma
    U += coef0
    if kernel == "poly":
        np.power(U, degree, out=U)
    else:
        np.tanh(U, out=U)


@dataclass(frozen=True, eq=False)
class KernelRows:
    """The terms of a fitted poly or sigmoid model behind a scaling (module docstring)."""

    mean: np.ndarray | None
    """μ, (d,); None when 0."""
    inv_scale: np.ndarray | None
    """r = 1 / σ, (d,); None when σ = 1."""
    support_t: np.ndarray
    """Sᵀ, (d, m)."""
    coef: np.ndarray
    """W, (m, p)."""
    intercept: np.ndarray
    """b, (p,)."""
    kernel: str
    gamma: float
    degree: int
    coef0: float
    reach: float
    """γ max‖s‖."""
    mean_norm: float
    """‖μ ⊙ r‖."""
    coef_tie: float
    """TIE_BOUND maxⱼ ‖Wⱼ‖₁ (deg for poly): one bound for every column."""
    intercept_tie: float
    """TIE_BOUND maxⱼ |bⱼ|."""

    @property
    def width(self) -> int:
        """Kernel entries per row (support vectors)."""
        return self.coef.shape[0]

    def scaled(self, X: np.ndarray) -> np.ndarray:
        """z = (x − μ) ⊙ r of raw rows X (n, d) or one row (d,), a new array."""
        Z = np.subtract(X, self.mean) if self.mean is not None else np.array(X)
        if self.inv_scale is not None:
            Z *= self.inv_scale
        return Z

    def bound(self, norms: np.ndarray) -> np.ndarray:
        """E (n, 1) of rows with ‖z‖ = ``norms`` (n,): module docstring's, the largest over
        columns."""
        B = norms + self.mean_norm
        B *= self.reach
        B += abs(self.coef0)
        if self.kernel == "poly":
            np.power(B, self.degree, out=B)
        else:
            B += 1.0
        B *= self.coef_tie
        B += self.intercept_tie
        return B[:, None]

    def scores(self, X: np.ndarray, screen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(D (n, p), E (n, 1)) of raw rows X (n, d)."""
        Z = self.scaled(X)
        U = np.dot(Z, self.support_t)
        kernel_of_products(U, self.kernel, self.gamma, self.degree, self.coef0)
        D = np.dot(U, self.coef)
        D += self.intercept
        return D, self.bound(np.sqrt(np.einsum("ij,ij->i", Z, Z)))

    def row(self, x: np.ndarray) -> np.ndarray:
        """D (p,) of one raw row x (d,)."""
        return self.row_scores(x)[0]

    def margin(self, x: np.ndarray, bound: bool = True) -> tuple[float, float]:
        """(D₀, E) of one raw row x (d,) as floats (two classes; E whatever ``bound``)."""
        f, e = self.row_scores(x)
        return float(f[0]), float(e[0])

    def row_scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D (p,), E (1,)) of one raw row x (d,)."""
        z = self.scaled(x)
        u = np.dot(z, self.support_t)
        kernel_of_products(u, self.kernel, self.gamma, self.degree, self.coef0)
        f = np.dot(u, self.coef)
        f += self.intercept
        B = self.reach * (math.sqrt(np.dot(z, z)) + self.mean_norm) + abs(self.coef0)
        B = B**self.degree if self.kernel == "poly" else 1.0 + B
        return f, np.array([self.coef_tie * B + self.intercept_tie])


def kernel_rows(
    support: np.ndarray,
    coef: np.ndarray,
    intercept: np.ndarray,
    kernel: str,
    gamma: float,
    degree: int,
    coef0: float,
    mean: np.ndarray | None = None,
    scale: np.ndarray | None = None,
) -> KernelRows:
    """The plan of support vectors ``support`` S (m, d), dual coefficients ``coef`` W (m, p) and
    ``intercept`` (p,) of a poly or sigmoid kernel, behind (x − ``mean``) / ``scale``."""
    S = np.asarray(support, dtype=np.float64)
    W = np.array(coef, dtype=np.float64).reshape(S.shape[0], -1)
    b = np.array(intercept, dtype=np.float64).reshape(-1)
    r = None if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
    mu = None if mean is None else np.array(mean, dtype=np.float64)
    mu_r = np.zeros(S.shape[1]) if mu is None else (mu if r is None else mu * r)
    s_max = float(np.sqrt(np.einsum("ij,ij->i", S, S).max())) if S.shape[0] else 0.0
    factor = float(max(int(degree), 1)) if kernel == "poly" else 1.0
    return KernelRows(
        mean=mu,
        inv_scale=r,
        support_t=np.ascontiguousarray(S.T),
        coef=W,
        intercept=b,
        kernel=kernel,
        gamma=float(gamma),
        degree=int(degree),
        coef0=float(coef0),
        reach=float(gamma) * s_max,
        mean_norm=float(np.linalg.norm(mu_r)),
        coef_tie=TIE_BOUND * factor * float(np.abs(W).sum(axis=0).max(initial=0.0)),
        intercept_tie=TIE_BOUND * float(np.abs(b).max(initial=0.0)),
    )
