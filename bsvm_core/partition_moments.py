"""Column moments of row partitions in one pass: the standardisation of a fit by partitions.

Each partition returns its count, column means and centred sums of squares M2 = Σ (x − x̄_p)²
(two-pass within the block), and the driver merges them pairwise by Chan, Golub & LeVeque (1979):
n = n_a + n_b, x̄ = x̄_a + δ n_b / n, M2 = M2_a + M2_b + δ² n_a n_b / n with δ = x̄_b − x̄_a. No
raw sum of squares is formed, so a large mean does not cancel the spread. As in the in-memory
``standardise``, a column whose magnitude could overflow a sum of squares is divided by a power of
two first (exact). The same pass returns the labels seen and whether every value is finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .partitions import RowPartitions

BIG = 1e150
"""Columns with |x| above this are divided by a power of two before squaring (as ``standardise``)."""

Moments = tuple[int, np.ndarray, np.ndarray]
"""(n, mean, M2) of a set of rows, on the scale of X / power."""


@dataclass(frozen=True)
class ColumnMoments:
    """Count, per-column power of two, mean and M2 of X / power, labels, finiteness."""

    n: int
    power: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    classes: np.ndarray
    finite: bool

    def standardisation(self, centre: bool) -> tuple[np.ndarray, np.ndarray]:
        """(mean, scale) of X / power: population SD, 1 for a constant column (as ``standardise``)."""
        mean = self.mean if centre else np.zeros_like(self.mean)
        m2 = self.m2 if centre else self.m2 + self.n * self.mean**2
        sd = np.sqrt(m2 / self.n)
        return mean, np.where(sd > 1e-12 * (1.0 + np.abs(mean)), sd, 1.0)


def column_power(big: np.ndarray) -> np.ndarray:
    """2^⌊log2 max|x|⌋ for columns beyond BIG, else 1: the exact pre-scaling of ``standardise``."""
    return np.where(big > BIG, np.exp2(np.floor(np.log2(np.where(big > 0, big, 1.0)))), 1.0)


def block_moments(X: np.ndarray, y: np.ndarray, p: int) -> tuple:
    """(n, power, mean, M2, labels, finite) of one partition; module-level for Dask."""
    n, d = X.shape
    finite = bool(np.isfinite(X).all())
    if n == 0 or not finite:
        return n, np.ones(d), np.zeros(d), np.zeros(d), np.unique(y), finite
    power = column_power(np.max(np.abs(X), axis=0))
    Xs = X / power
    mean = Xs.mean(axis=0)
    return n, power, mean, ((Xs - mean) ** 2).sum(axis=0), np.unique(y), finite


def merge_moments(a: Moments, b: Moments) -> Moments:
    """(n, mean, M2) of the union of two row sets; Chan, Golub & LeVeque (1979), eq. 2.1."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if n_a == 0 or n_b == 0:
        return a if n_b == 0 else b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), m2_a + m2_b + delta**2 * (n_a * n_b / n)


def column_moments(parts: RowPartitions) -> ColumnMoments:
    """One pass: merged column moments, the sorted labels and finiteness of every partition."""
    blocks = parts.map_gather(block_moments)
    finite = all(b[5] for b in blocks)
    classes = np.unique(np.concatenate([b[4] for b in blocks]))
    power = np.max([b[1] for b in blocks], axis=0)
    items: list[Moments] = [
        (n, mean * (pw / power), m2 * (pw / power) ** 2) for n, pw, mean, m2, *_ in blocks
    ]
    while len(items) > 1:  # pairwise, as sum_results: a balanced tree
        paired = [merge_moments(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = paired + items[len(paired) * 2 :]
    n, mean, m2 = items[0]
    return ColumnMoments(int(n), power, mean, m2, classes, finite)
