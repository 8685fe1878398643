"""One Newton step of the C-SVC dual on its free face, clipped to the box: SMO's accelerator.

SMO moves two variables a step; once its free set F (0 < α_t < C) stops changing, its remaining
steps only converge α_F on that face, slowly where Q_FF is ill-conditioned (C = 10 on moons: ~400 of
587 steps). The face's minimiser with the bound variables held is one solve of the KKT system

    Q_FF d + λ y_F = −g_F,   y_Fᵀ d = 0        (g = ∇f = Qα − e at the current α)

by one Cholesky factorisation of M = Q_FF + εI and the Schur complement: d = −M⁻¹(g_F + λ y_F),
λ = −(y_Fᵀ M⁻¹ g_F) / (y_Fᵀ M⁻¹ y_F). The ridge ε (``RIDGE`` per free point) keeps M positive
definite where the rbf Gram matrix of low-dimensional data is numerically singular or, computed from
float32 kernel values, slightly indefinite; d then still minimises gᵀd + ½ dᵀMd, so gᵀd = −dᵀMd < 0,
and the objective falls along d for t ≤ 1 because dᵀQ_FF d ≤ dᵀMd. The step goes as far as t ≤ 1
keeps 0 ≤ α_F + t d ≤ C (the variables that block sit at their bound after it) and is refused when
the decrease ½ t² dᵀQ_FF d + t gᵀd it predicts is not negative, so SMO's objective never rises.

For rbf the kernel is held as D = 1 − K (``kernel_matrices.rbf_distance_matrix``). Since y_Fᵀd = 0,
Q_FF's constant part y_F y_Fᵀ adds nothing on the face, and the step moves F = −y∘∇f by
ΔF = D_{·F}(y_F ∘ s) (s = t d) with no constant term.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dpotrf

from .active_set import solve_with_ones

RIDGE = 1e-7
"""ε per free point added to Q_FF's diagonal: above the float32 kernel values' rounding (~6e-8 an
entry, so up to |F| · 6e-8 in Q_FF's eigenvalues), far below the curvatures that matter (Q_FF's
smallest eigenvalue at moons' C = 10 optimum is 5.4e-5)."""


def face_newton_step(
    D_F: np.ndarray,
    free: np.ndarray,
    y_F: np.ndarray,
    a_F: np.ndarray,
    F_F: np.ndarray,
    C: float,
    entering: int = 0,
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(new α_F, ΔF, the blocking point's place in F or −1) of the clipped Newton step on the free
    face; None when M = K_FF + εI fails to factor or the step is not a descent direction.

    ``D_F`` are the rows D_{F·} of D = 1 − K (rbf, |F| × n), ``free`` their indices, ``y_F`` the
    targets, ``a_F`` the free α and ``F_F`` their F = −y∘∇f. In z = y_F ∘ d the system reads
    K_FF z + λe = F_F, eᵀz = 0 (multiply the first by diag(y_F)): z = u − λv with M u = F_F,
    M v = e, λ = eᵀu / eᵀv, and gᵀd = −F_Fᵀz. ΔF = t D_{·F} z over all n points; the new α_F lie
    in [0, C], the blocking one at its bound.

    The last ``entering`` points of the arrays are points at a bound that violate the optimality
    conditions (:func:`.smo_distances` picks them). They stay where they are unless the step on
    the free face alone is not blocked (its minimiser lies inside the box): then the face grows by
    them (:func:`_widened`) and the step is the Newton step of the wider face, clipped the same
    way (if it goes far enough: ``WIDE_MAX_RATIO``), so the points enter in one step instead of
    one SMO step each; still a descent step.
    """
    k = free.size - entering
    z = _direction(D_F[:k], free[:k], F_F[:k])
    if z is None or not float(F_F[:k] @ z) > 0.0:  # gᵀd < 0
        return None
    d = y_F[:k] * z
    keep = None  # the places in the arrays of the points that move (None: the first k)
    a = a_F[:k]
    ratio = _ratios(d, a, C)
    if entering and ratio.max() <= 1.0:
        wide = _widened(D_F, free, y_F, a_F, F_F, C, k)
        if wide is not None:
            a_wide = a_F.take(wide[1])
            r_wide = _ratios(wide[0], a_wide, C)
            if r_wide.max() <= WIDE_MAX_RATIO:
                (d, keep), a, ratio = wide, a_wide, r_wide
    worst = int(ratio.argmax())
    r_max = ratio.item(worst)
    t = 1.0 if r_max <= 1.0 else 1.0 / r_max
    rises = d.item(worst) > 0.0
    new = d
    new *= t
    new += a
    blocked = -1
    if r_max >= 1.0:
        blocked = worst if keep is None else int(keep[worst])
        new[worst] = C if rises else 0.0
    np.maximum(new, 0.0, out=new)  # rounding only (np.clip costs 3x these two)
    np.minimum(new, C, out=new)
    z = new - a
    if keep is None:
        z *= y_F[:k]
        dF = z @ D_F[:k]
        keep_size = k
    else:
        z *= y_F.take(keep)
        dF = z @ (D_F if keep.size == free.size else D_F.take(keep, axis=0))
        keep_size = keep.size
    if keep_size < free.size:  # the points left out keep their α
        new_all = a_F.copy()
        new_all[slice(k) if keep is None else keep] = new
        new = new_all
    return new, dF, blocked


def _ratios(d: np.ndarray, a: np.ndarray, C: float) -> np.ndarray:
    """d / room: t d ≤ C − α where d > 0 and ≥ −α where d ≤ 0, so t ≤ 1 / max(d / room); room ≠ 0
    on the free face (an entering point's d points into the box)."""
    return d / ((d > 0.0) * C - a)


def _widened(
    D_F: np.ndarray,
    free: np.ndarray,
    y_F: np.ndarray,
    a_F: np.ndarray,
    F_F: np.ndarray,
    C: float,
    k: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(d, the places kept) of the Newton direction on the face of the first k points and the
    entering ones after them, less those it would move out of the box (α = 0 with d < 0, α = C
    with d > 0; the direction is solved again without them, at most ``WIDEN_TRIES`` times); None
    when none is left or a system fails."""
    keep = np.arange(free.size)
    for _ in range(WIDEN_TRIES):
        z = _direction(D_F.take(keep, axis=0), free.take(keep), F_F.take(keep))
        if z is None:
            return None
        d = y_F.take(keep) * z
        tail_a, tail_d = a_F.take(keep[k:]), d[k:]
        out = ((tail_a <= 0.0) & (tail_d < 0.0)) | ((tail_a >= C) & (tail_d > 0.0))
        if not out.any():
            return d, keep
        keep = np.concatenate((keep[:k], keep[k:][~out]))
        if keep.size == k:
            return None
    return None


WIDE_MAX_RATIO = 2.0
"""A widened step is taken only if it goes at least 1 / this of the way (t ≥ 0.5), else the free
face's own (interior) step is: on a numerically low-rank face (moons) the entering points' large
directions would stop it short and leave them to SMO to take out again."""

WIDEN_TRIES = 3
"""Directions solved at most for a widened face, each without the entering points the last one
moved out of the box."""


def _direction(D_F: np.ndarray, free: np.ndarray, F_F: np.ndarray) -> np.ndarray | None:
    """z = u − λv of the face's Newton system (K_FF + εI) z + λe = F_F, eᵀz = 0; None when the
    matrix fails to factor."""
    k = free.size
    M = D_F.take(free, axis=1)
    np.subtract(1.0, M, out=M)  # K_FF
    M.ravel()[:: k + 1] = 1.0 + RIDGE * k  # K_ii = 1; M is contiguous, so a view
    L, info = dpotrf(M, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return None
    uv = solve_with_ones(L, F_F, lower=True)
    if uv is None:
        return None
    sum_u, sum_v = uv.sum(axis=0).tolist()
    z = uv[:, 1] * (sum_u / sum_v)
    np.subtract(uv[:, 0], z, out=z)  # eᵀz = 0
    return z
