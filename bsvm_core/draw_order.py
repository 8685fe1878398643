"""Rows grouped by the direction they project the draws along, and each group's order of the draws.

A row x̃ sees the draws through x̃'w̃_g = x̃'w̄ + uᵀs_g, where M₂ = VΛVᵀ is the draws' covariance,
u = Λ^½Vᵀx̃ the row in whitened coordinates and s_g = Λ^-½Vᵀ(w̃_g − w̄) the whitened draws. Two
rows whose u lie along nearly the same axis (|cos| near 1) rank the draws in nearly the same
order, or its reverse. Laying out the draws in one group's order therefore puts each row's tail
values at the two ends of its row: the comparison masks come in long runs, which numpy compacts
about twice as fast as scattered ones. The order only moves values around; every value is
still computed and compared, so the result does not depend on it.
"""

from __future__ import annotations

import numpy as np

ROWS_PER_GROUP = 8
"""Blocks a group should hold at least: sorting the draws for it costs about a quarter block."""

MAX_GROUPS = 64
"""Groups at most: past this the runs hardly get longer."""

CENTRE_SAMPLE = 4096
"""Rows among which the groups' centres are chosen."""


def whitened_rows(Xt: np.ndarray, M2: np.ndarray) -> np.ndarray:
    """u = Λ^½Vᵀx̃ for each row, with M₂ = VΛVᵀ, so that x̃'(w̃_g − w̄) = uᵀs_g."""
    lam, V = np.linalg.eigh(M2)
    return Xt @ (V * np.sqrt(np.clip(lam, 0.0, None)))


def unit_rows(U: np.ndarray) -> np.ndarray:
    """Each row over its norm; rows of norm 0 stay 0."""
    norm = np.linalg.norm(U, axis=1, keepdims=True)
    return np.divide(U, norm, out=np.zeros_like(U), where=norm > 0)


def farthest_axes(U: np.ndarray, n_groups: int) -> np.ndarray:
    """Indices of rows whose axes are spread out: each next one is the row least aligned, in
    |cos|, with all those chosen before (farthest-point sampling, Gonzalez 1985)."""
    first = int(np.argmax(np.abs(U).sum(axis=1)))
    chosen = [first]
    best = np.abs(U @ U[first])
    best[~U.any(axis=1)] = np.inf  # rows of norm 0 have no axis
    for _ in range(n_groups - 1):
        nxt = int(np.argmin(best))
        if best[nxt] >= 1.0 - 1e-12:  # every row lies on a chosen axis already
            break
        chosen.append(nxt)
        np.maximum(best, np.abs(U @ U[nxt]), out=best)
    return np.asarray(chosen)


def n_groups_for(n_rows: int, block: int) -> int:
    """Groups for ``n_rows`` rows processed ``block`` at a time: 1 to ``MAX_GROUPS``."""
    return int(min(MAX_GROUPS, max(1, n_rows // (ROWS_PER_GROUP * block))))


def group_rows(
    X: np.ndarray, M2: np.ndarray, n_groups: int, chunk: int = CENTRE_SAMPLE
) -> tuple[np.ndarray, np.ndarray]:
    """(centre rows x̃_c (groups, k), each row's group), the axis of largest |cos| to its own.

    Centres are chosen among evenly spaced rows (at most ``CENTRE_SAMPLE``); rows are labelled
    ``chunk`` at a time, so the memory is O(chunk · groups) whatever the row count.
    """
    n = X.shape[0]
    stride = max(1, n // CENTRE_SAMPLE)
    sample = np.column_stack([np.ones(len(range(0, n, stride))), X[::stride]])
    U = unit_rows(whitened_rows(sample, M2))
    picked = farthest_axes(U, n_groups)
    centres, axes = sample[picked], U[picked]
    labels = np.empty(n, dtype=np.intp)
    for start in range(0, n, chunk):
        rows = np.column_stack([np.ones(min(chunk, n - start)), X[start : start + chunk]])
        cos = unit_rows(whitened_rows(rows, M2)) @ axes.T
        labels[start : start + chunk] = np.argmax(np.abs(cos), axis=1)
    return centres, labels


def draw_order(centre: np.ndarray, Wt: np.ndarray) -> np.ndarray:
    """The draws sorted by the centre row's values x̃_c'w̃_g."""
    return np.argsort(centre @ Wt)
