"""Face Newton steps on a row cache (``kernel_cache.KernelRowCache``): problems past
``kernel_dual.DENSE_MAX_ROWS``, whose kernel matrix is not held whole.

The step needs only K_FF (from the free points' rows, gathered one at a time: k² values, not the
k × n rows) and F_F; its ΔF = −K_{·F} z (z = y_F ∘ Δα_F) is summed row by row from the cache,
which computes the rows it no longer holds.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import daxpy

from .face_newton import face_newton_step
from .kernel_cache import KernelRowCache

# No cap from the cache's size: a face of more rows than the cache holds takes the same step, its
# evicted rows computed again (twice: K_FF, then ΔF), so a fit's α does not depend on ``cache_mb``
# (``test_kernel_svm``'s small cache). Its SMO waits 1 + k³ / ``DENSE_NEWTON_FLOPS_PER_STEP``
# steps of two rows each first, more rows than the step's 2k from k ≈ 550. Memory beside the
# cache: two k × k float64 arrays (D_FF and its Fortran-ordered gather, factorised in place), at
# most 16 MB at ``smo.NEWTON_MAX_FREE`` = 1,000 points whatever n; the dense route's steps gather
# k × n rows of D beside its matrix (24 MB at 1,000 points of 3,000 rows).


def cached_newton_applies(cache: object, diag: np.ndarray, floor_curvature: bool) -> bool:
    """Whether SMO on ``cache`` may take face Newton steps: a ``KernelRowCache`` of a kernel with
    K_ii = 1 (rbf: :func:`face_newton_step` sets M's diagonal to 1 + ε)."""
    return isinstance(cache, KernelRowCache) and not floor_curvature and bool(np.all(diag == 1.0))


def cached_face_newton_step(
    cache: KernelRowCache,
    free: np.ndarray,
    y_F: np.ndarray,
    a_F: np.ndarray,
    F_F: np.ndarray,
    C: float,
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """:func:`face_newton_step` from cached rows K_{F·}: D_FF = 1 − K_FF gathered row by row, the
    step on it, then ΔF = −Σ_p z_p K_p (z = y_F ∘ (α_F' − α_F); F = −y∘∇f, ∇f = Qα − e) over all
    n points. None as :func:`face_newton_step`."""
    k = free.size
    listed = free.tolist()
    D_FF = np.empty((k, k))
    for p, i in enumerate(listed):
        cache.row(i).take(free, None, D_FF[p], "clip")
    np.subtract(1.0, D_FF, out=D_FF)
    step = face_newton_step(D_FF, np.arange(k), y_F, a_F, F_F, C)
    if step is None:
        return None
    new, _, blocked = step
    z = new - a_F
    z *= y_F
    dF = np.zeros(cache.block.shape[1])
    for p, i in enumerate(listed):
        zp = z.item(p)
        if zp != 0.0:
            daxpy(cache.row(i), dF, a=-zp)
    return new, dF, blocked
