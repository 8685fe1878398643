"""Class counts, means and within-class scatter of row partitions, in one pass (LDA/QDA).

Each partition returns, per class it holds, (n, mean, R) with R'R = Σ (x − x̄)(x − x̄)' the
centred scatter (R the triangular factor of a QR of the centred rows, at most d rows). Two such
summaries combine by Chan, Golub & LeVeque's (1979) parallel update written on square roots:

    n = n_a + n_b,  x̄ = x̄_a + (n_b / n) δ,  δ = x̄_b − x̄_a,
    R'R = R_a'R_a + R_b'R_b + (n_a n_b / n) δδ'   ⇐   R = qr([R_a; R_b; √(n_a n_b / n) δ'])

so no raw sums of squares are formed (the TSQR of Demmel et al. 2012 with the mean correction).
The stacked factors of all classes stand in for the residuals of the in-memory fit: they have
the same class-wise Gram matrices, column norms and singular values, so LDA and QDA run the very
same code on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import linalg

from .partitions import RowPartitions

Summary = tuple[int, np.ndarray, np.ndarray]
"""(n, mean (d,), R (r, d) with R'R the centred scatter, r ≤ min(n, d))."""


@dataclass(frozen=True)
class ClassMoments:
    """Per-class counts, means and scatter factors of a whole data set, classes sorted."""

    classes: np.ndarray
    counts: np.ndarray
    means: np.ndarray
    factors: list[np.ndarray]
    max_abs: float
    n_features: int


def scatter_factor(Xc: np.ndarray) -> np.ndarray:
    """R with R'R = Xc'Xc (QR of the centred rows; none for a single row, whose scatter is 0).

    A copy of R's first rows: SciPy's ``mode="r"`` gives an (n, d) array, and a view of it would
    keep all n rows alive as long as the summary (a streamed fit would then hold the data set).
    """
    if Xc.shape[0] <= 1:
        return np.zeros((0, Xc.shape[1]))
    return linalg.qr(Xc, mode="r", check_finite=False)[0][: min(Xc.shape)].copy()


def merge_summaries(a: Summary, b: Summary) -> Summary:
    """Chan et al. (1979) on factors: R'R = R_a'R_a + R_b'R_b + (n_a n_b / n) δδ' (module doc)."""
    n_a, mean_a, R_a = a
    n_b, mean_b, R_b = b
    n = n_a + n_b
    delta = mean_b - mean_a
    mean = mean_a + (n_b / n) * delta
    stacked = np.vstack([R_a, R_b, np.sqrt(n_a * n_b / n) * delta[None, :]])
    if stacked.shape[0] > stacked.shape[1]:
        stacked = linalg.qr(stacked, mode="r", check_finite=False)[0][: stacked.shape[1]].copy()
    return n, mean, stacked


def block_moments(X: np.ndarray, y: np.ndarray, p: int) -> tuple[dict[Any, Summary], float, bool]:
    """One partition's ({label: (n, mean, R)}, max |x|, all finite)."""
    finite = bool(np.isfinite(X).all())
    max_abs = max(float(X.max(initial=0.0)), -float(X.min(initial=0.0))) if finite else np.inf
    labels, y_idx = np.unique(y, return_inverse=True)
    out: dict[Any, Summary] = {}
    for k, label in enumerate(labels.tolist()):
        rows = X[y_idx == k]
        mean = rows.mean(axis=0)
        out[label] = (rows.shape[0], mean, scatter_factor(rows - mean))
    return out, max_abs, finite


def _merge_tree(items: list[Summary]) -> Summary:
    """Balanced pairwise merge (rounding grows with log of the number of partitions)."""
    while len(items) > 1:
        merged = [merge_summaries(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            merged.append(items[-1])
        items = merged
    return items[0]


def class_moments(parts: RowPartitions) -> ClassMoments:
    """Counts, means and scatter factors of every class over all partitions: one pass."""
    results = parts.map_gather(block_moments)
    if not all(finite for _, _, finite in results):
        raise ValueError("Input X contains NaN or infinity.")
    by_label: dict[Any, list[Summary]] = {}
    for summaries, _, _ in results:
        for label, summary in summaries.items():
            by_label.setdefault(label, []).append(summary)
    classes = np.unique(np.array(list(by_label)))
    merged = [_merge_tree(by_label[label]) for label in classes.tolist()]
    return ClassMoments(
        classes=classes,
        counts=np.array([n for n, _, _ in merged], dtype=np.int64),
        means=np.stack([mean for _, mean, _ in merged]),
        factors=[R for _, _, R in merged],
        max_abs=max(m for _, m, _ in results),
        n_features=parts.n_features,
    )
