"""The linear SVM's primal objective, its optimal intercept for fixed weights, and the solver result.

Primal (Cortes & Vapnik 1995; Chang & Lin 2011, eq. 1 with a linear kernel)::

    P(w, b) = ½‖w‖² + C Σ_i max(0, 1 − y_i (w'x_i + b)),   b unpenalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearSolution:
    """A fitted binary linear SVM: weights, intercept and how the solver got there."""

    w: np.ndarray
    b: float
    n_iter: int
    converged: bool
    objective: float


def primal_objective(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float, C: float) -> float:
    """P(w, b) = ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)); Cortes & Vapnik (1995)."""
    return primal_from_residuals(w, 1.0 - y * (X @ w + b), C)


def primal_from_residuals(w: np.ndarray, z: np.ndarray, C: float) -> float:
    """P(w, b) = ½‖w‖² + C Σ max(0, z_i) from the residuals z_i = 1 − y_i(w'x_i + b) at hand."""
    return float(0.5 * (w @ w) + C * np.maximum(0.0, z).sum())


def optimal_intercept(s: np.ndarray, y: np.ndarray, shift: float = 0.0) -> float:
    """argmin_b Σ max(0, 1 − y_i(s_i + b)) − shift·b for fixed scores s_i = w'x_i: an order statistic.

    The derivative in b starts at −n₊ − shift and rises by one at every breakpoint 1 − s_i
    (y_i = +1) and −1 − s_i (y_i = −1), so the minimum sits at the (n₊ + shift)-th smallest
    breakpoint (``shift`` = Σ y_i over rows held at the bound elsewhere, an integer; clamped to the
    ends when the problem is unbounded).
    """
    breaks = y - s
    k = round(int(np.count_nonzero(y > 0)) + shift)
    if k <= 0:
        return float(breaks.min())
    if k >= breaks.size:
        return float(breaks.max())
    lo = np.partition(breaks, (k - 1, k))
    return float(0.5 * (lo[k - 1] + lo[k]))
