"""A linear model's decision matrix D = z W + b of rows scaled as z = (x − μ) / σ, folded.

    D = x W' + b',   W' = W ⊙ r,   b' = b − (μ ⊙ r) W,   r = 1 / σ   (W scaled by r row-wise),

one product per block of rows. Its error bound, one per row for every column, is ``TIE_BOUND``
times the largest scale of the terms, E = maxⱼ [|x| (M ⊙ r) + (|μ| ⊙ r) M + |b|]ⱼ ≤ |x| m + o,
m = maxⱼ (M ⊙ r)ⱼ, o = maxⱼ ((|μ| ⊙ r) M + |b|)ⱼ, with M = |W| (or, for a linear-kernel SVM whose W
is Σ_s s αᵀ, M = |S|ᵀ|α|, the scale of the products the estimator sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .row_plans import TIE_BOUND


@dataclass(frozen=True, eq=False)
class LinearRows:
    """The folded terms of a linear model (module docstring)."""

    weights: np.ndarray
    """W', (d, p)."""
    intercept: np.ndarray
    """b', (p,)."""
    magnitude: np.ndarray
    """TIE_BOUND · m, (d, 1)."""
    offset: np.ndarray
    """TIE_BOUND · o, (1,)."""

    @property
    def width(self) -> int:
        """Entries of |x| per row."""
        return self.weights.shape[0]

    def scores(self, X: np.ndarray, screen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(D (n, p), E (n, 1)) of raw rows X (n, d): x W' + b' and TIE_BOUND (|x| m + o)."""
        D = np.dot(X, self.weights)
        D += self.intercept
        E = np.dot(np.abs(X), self.magnitude)
        E += self.offset
        return D, E

    def row(self, x: np.ndarray) -> np.ndarray:
        """D (p,) of one raw row: x W' + b'."""
        f = np.dot(x, self.weights)
        f += self.intercept
        return f

    def margin(self, x: np.ndarray, bound: bool = True) -> tuple[float, float]:
        """(D₀, E) of one raw row x (d,) as floats (two classes); E = 0 unless ``bound``."""
        f = float(self.row(x)[0])
        if not bound:
            return f, 0.0
        return f, float(np.dot(np.abs(x), self.magnitude)[0] + self.offset[0])

    def row_scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D (p,), E (1,)) of one raw row: x W' + b' and TIE_BOUND (|x| m + o)."""
        e = np.dot(np.abs(x), self.magnitude)
        e += self.offset
        return self.row(x), e


def linear_rows(
    weights: np.ndarray,
    intercept: np.ndarray,
    mean: np.ndarray | None = None,
    scale: np.ndarray | None = None,
    magnitude: np.ndarray | None = None,
) -> LinearRows:
    """The plan of D = z ``weights`` (d, p) + ``intercept`` (p,), z = (x − ``mean``) / ``scale``;
    ``magnitude`` M (d, p) the scale of the estimator's sum (|W| when None)."""
    W = np.array(weights, dtype=np.float64)
    b = np.array(intercept, dtype=np.float64).reshape(-1)
    M = np.abs(W) if magnitude is None else np.asarray(magnitude, dtype=np.float64)
    d = W.shape[0]
    r = np.ones(d) if scale is None else 1.0 / np.asarray(scale, dtype=np.float64)
    mu_r = np.zeros(d) if mean is None else np.asarray(mean, dtype=np.float64) * r
    return LinearRows(
        weights=W * r[:, None],
        intercept=b - mu_r @ W,
        magnitude=TIE_BOUND * (M * r[:, None]).max(axis=1, keepdims=True, initial=0.0),
        offset=TIE_BOUND * (np.abs(mu_r) @ M + np.abs(b)).max(keepdims=True),
    )
