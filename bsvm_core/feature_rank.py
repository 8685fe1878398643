"""Whether the centred features span at least k dimensions, by a small Gaussian sketch: the
kernel solvers' test before a hand-over to active sets (``kernel_dual``)."""

from __future__ import annotations

import functools

import numpy as np

RANK_SAMPLE_ROWS = 128
"""Rows (evenly spaced, at most this many) that :func:`rank_at_least` looks at."""


@functools.cache
def _gaussian_sketch(d: int, k: int) -> np.ndarray:
    """A fixed d × k standard Gaussian matrix (seed 0), made once per shape."""
    return np.random.default_rng(0).standard_normal((d, k))


def rank_at_least(X: np.ndarray, k: int) -> bool:
    """Whether the centred X has rank ≥ k: the k × k Gram matrix of (X − x̄)G, G a fixed Gaussian
    d × k matrix, has no eigenvalue below 1e-12 of its largest (singular values below 1e-6), on
    ``RANK_SAMPLE_ROWS`` of the rows."""
    if min(X.shape) < k:
        return False
    sketch = X[:: -(-X.shape[0] // RANK_SAMPLE_ROWS)] @ _gaussian_sketch(X.shape[1], k)
    sketch -= sketch.mean(axis=0)
    eig = np.linalg.eigvalsh(sketch.T @ sketch)
    return bool(eig[0] > 1e-12 * eig[-1])
