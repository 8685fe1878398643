"""One Newton step of the C-SVC dual on its free face, clipped to the box: SMO's accelerator.

SMO moves two variables a step; once its free set F (0 < α_t < C) stops changing, its remaining
steps only converge α_F on that face, slowly where Q_FF is ill-conditioned (C = 10 on moons: ~400 of
587 steps). The face's minimiser with the bound variables held is one solve of the KKT system

    Q_FF d + λ y_F = −g_F,   y_Fᵀ d = 0        (g = ∇f = Qα − e at the current α)

by one Cholesky factorisation of M = Q_FF + εI (LAPACK's ``dposv``) and the Schur complement: d = −M⁻¹(g_F + λ y_F),
λ = −(y_Fᵀ M⁻¹ g_F) / (y_Fᵀ M⁻¹ y_F). The ridge ε (``RIDGE`` per free point) keeps M positive
definite where the rbf Gram matrix of low-dimensional data is numerically singular or, computed from
float32 kernel values, slightly indefinite; d then still minimises gᵀd + ½ dᵀMd, so gᵀd = −dᵀMd < 0,
and the objective falls along d for t ≤ 1 because dᵀQ_FF d ≤ dᵀMd. The step goes as far as t ≤ 1
keeps 0 ≤ α_F + t d ≤ C (the variables that block sit at their bound after it) and is refused when
the decrease ½ t² dᵀQ_FF d + t gᵀd it predicts is not negative, so SMO's objective never rises.

A step blocked early (t < 1 / ``CONTINUE_FROM``: on moons at C = 10 t is 1/5-1/860, every step
blocked) goes on from there along the face with the blocking point held, to the next bound or the
smaller face's minimiser, and so on (:func:`continue_blocked`): each piece one rank-1 downdate of
the face's projected inverse, made once from the step's factor (on large faces only its columns
that the pieces read, :class:`ProjectedColumns`), not a new factorisation.

For rbf the kernel is held as D = 1 − K (``kernel_matrices.rbf_distance_matrix``). Since y_Fᵀd = 0,
Q_FF's constant part y_F y_Fᵀ adds nothing on the face, and the step moves F = −y∘∇f by
ΔF = D_{·F}(y_F ∘ s) (s = t d) with no constant term.
"""

from __future__ import annotations

import math
from collections.abc import MutableSequence, Sequence
from functools import lru_cache

import numpy as np
from scipy.linalg.blas import daxpy, dger
from scipy.linalg.lapack import dposv, dpotrs

CONTINUE_FROM = 20.0
"""A step whose first bound is met before 1 / this of the way (t < 0.05: |d| ≫ the room, Q_FF
ill-conditioned) goes on with the blocking points held (:func:`continue_blocked`). Moons(400) at
C = 10 (every Newton step blocked, t down to 1/860): 205 iterations → 153 (8 Newton steps, not 20),
solver CPU 0.84-0.95x (interleaved A/B, 2 cores shared); at C = 100 / 1000 526 → 249 / 1165 → 349.
Continuing every blocked step (t < 1) also continued moons' at C = 1 and wine's pairs' (t ~ 1/2 -
1/6), whose few pieces saved fewer SMO steps than they cost (~10 µs set-up, ~5 µs a piece):
moons C = 1 1.02-1.08x, wine C = 10 1.05-1.07x; from 20 on those keep their bits."""

MAX_CONTINUED = 10
"""A continued step goes on along at most this many more pieces (each holds one more point)."""

COLUMNS_FROM = 96
"""Faces of this many points or more make the continuation's columns of P one at a time
(:class:`ProjectedColumns`: a solve on e_q, 2|F|² flops, per piece), not all of P (|F|³ flops:
5.8 of 7.5 ms of the Newton steps of make_classification(500, 8, 5 informative, flip_y=0.2) at
C = 100, faces of 150-200 points). The same α_F to ~1e-13 C (tested); fit CPU there 1.46x SVC →
1.15x (C = 100), 0.80 → 0.62x (C = 1,000). Not tuned below: smaller faces (the small sets', up to
~90 points) keep their bits."""

MAX_CONTINUED_COLUMNS = 40
"""``MAX_CONTINUED`` on faces of ``COLUMNS_FROM`` points or more, whose pieces cost a column's
solve (2|F|² flops) and a few axpys each."""

RIDGE = 1e-7
"""ε per free point added to Q_FF's diagonal: above the float32 kernel values' rounding (~6e-8 an
entry, so up to |F| · 6e-8 in Q_FF's eigenvalues), far below the curvatures that matter (Q_FF's
smallest eigenvalue at moons' C = 10 optimum is 5.4e-5)."""

NEWTON_STREAK = 3
"""A Newton step on the free face (``smo_distances`` and ``smo`` with ``newton``) follows this many
SMO steps in a row whose two points were both free before the step: SMO is then converging the face,
not changing the sets. Iterations (SMO and Newton steps) at streaks 1 / 2 / 3 / 4 / 6, moons(400) at
C = 10: 171 / 194 / 205 / 234 / 319 (587 without), at C = 1 116 / 114 / 120 / 129 / 134 (173);
wine's pairs at C = 10 25-37 / 28-42 / 30-45 / 38-49 / 42-54 (66-102). Fewer iterations cost more
Newton steps (~35 µs each): the sum of the eight solves' CPU (moons and wine's pairs, C = 1 and 10)
was least at 3, 5 % below 2; moons at C = 10 1.71 ms against 1.87 (2) and 2.08 (1), 2.6-2.8 without.
With blocked steps continued (``face_newton.CONTINUE_FROM``), streaks 1 / 2 / 3 / 4: moons at C = 10
114 / 139 / 153 / 174 iterations, solver CPU 0.94 / 0.91 / 0.90 / 0.87 of streak 3 without them; C =
1 1.40 / 1.22 / 0.99 / 1.04, wine at C = 10 1.17 / 1.05 / 1.02 / 0.97: 3 kept."""

NEWTON_FLOPS_PER_STEP = 30_000
"""A Newton step on |F| free points waits |F|³ / this many SMO steps after the last one (its
Cholesky's |F|³ / 3 flops at ~2 GFlop/s against an SMO step's ~5 µs), and twice as long after a
refused one: large free sets are factorised rarely."""


def newton_wait(k: int, taken: bool, flops_per_step: int = NEWTON_FLOPS_PER_STEP) -> int:
    """SMO steps before the next face Newton step after one on k free points: 1 + k³ /
    ``flops_per_step`` (its Cholesky's cost in SMO steps), twice after a refused one."""
    wait = 1 + k**3 // flops_per_step
    return wait if taken else 2 * wait


def apply_newton_step(
    step: tuple[np.ndarray, np.ndarray, int],
    alpha: list[float],
    free: list[int],
    grads: tuple[np.ndarray, ...],
    up: MutableSequence[float],
    low: MutableSequence[float],
    y: Sequence[float] | bytes,
    C: float,
) -> None:
    """Move SMO's state by a face Newton step ``step`` (:func:`face_newton_step`'s result on the
    points ``free``): α_F ← new α_F, F += ΔF, and the points left at a bound (the blocking one,
    others by rounding) out of I_up (y_t > 0 at C, y_t < 0 at 0: up_t ← −inf) or I_low (low_t ←
    +inf).

    ``grads`` are the arrays that hold F (``smo``: F; ``smo_distances``: U and L, whose ±inf
    stay; two adds, not one broadcast over [U; L]: ~0.4 µs less); ``up`` and ``low`` are I_up's
    and I_low's penalties (``smo``) or U and L (``smo_distances``); ``y`` is read by sign (the
    targets, or ``smo_distances``' bytes 1 / 0)."""
    dF = step[1]
    for grad in grads:
        grad += dF
    inf = math.inf
    for p, a in zip(free, step[0].tolist(), strict=True):
        alpha[p] = a
        if 0.0 < a < C:
            continue
        if (y[p] > 0) == (a >= C):
            up[p] = -inf
        else:
            low[p] = inf


FORTRAN_GATHER_FROM = 23
"""|F| from which M is gathered Fortran-ordered (a fancy index of D_Fᵀ, ~6 instructions an entry
over ~8,000 fixed) rather than C-ordered by ``take`` (~12 an entry) and copied by f2py (~6 an entry
over ~2,300): callgrind, 4,600 instructions fewer at |F| = 30, 1,000 more at 20."""

UNCLIPPED_MAX = 1.0 - 2.0**-20
"""An unblocked step whose largest d / room is at most this needs no clip: α + d stays in [0, C] to
the bit. With u = 2⁻⁵³, room = fl(C − α) ≤ (C − α)(1 + u) and fl(d / room) ≥ (d / room)(1 − u) for
d > 0 (an underflowed quotient means d ≪ room), so a rising point has d ≤ r(1 + u)/(1 − u)(C − α) <
C − α; a falling one likewise −d < α. Then α + d lies in [0, C] exactly and rounding, monotone,
keeps fl(α + d) there (0 and C are floats). Wine's pairs: r up to 0.67 on unblocked steps."""


@lru_cache(maxsize=16)
def identity(k: int) -> np.ndarray:
    """The k × k identity (read-only): the right-hand side of M⁻¹'s solve."""
    eye = np.eye(k)
    eye.flags.writeable = False
    return eye


@lru_cache(maxsize=16)
def rows_and_ones(k: int) -> np.ndarray:
    """A 2 × k array (read-only) whose second row is e: the solve's right-hand side, transposed."""
    rows = np.ones((2, k))
    rows.flags.writeable = False
    return rows


@lru_cache(maxsize=16)
def box_ends(C: float) -> np.ndarray:
    """[[C], [0]] (read-only): ``box_ends(C) − α_F`` is the room to each end of the box, up and down."""
    ends = np.array([[C], [0.0]])
    ends.flags.writeable = False
    return ends


@lru_cache(maxsize=16)
def doubled_ends(C: float, k: int) -> np.ndarray:
    """[C … C, 0 … 0], k of each (read-only): ``box_ends(C)`` flattened against [α; α]."""
    ends = np.repeat(np.array((C, 0.0)), k)
    ends.flags.writeable = False
    return ends


def face_newton_step(
    D_F: np.ndarray, free: np.ndarray, y_F: np.ndarray, a_F: np.ndarray, F_F: np.ndarray, C: float
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(new α_F, ΔF, the blocking point's place in F or −1) of the clipped Newton step on the free
    face; None when M = K_FF + εI fails to factor or the step is not a descent direction.

    ``D_F`` are the rows D_{F·} of D = 1 − K (rbf, |F| × n), ``free`` their indices, ``y_F`` the
    targets, ``a_F`` the free α and ``F_F`` their F = −y∘∇f. In z = y_F ∘ d the system reads
    K_FF z + λe = F_F, eᵀz = 0 (multiply the first by diag(y_F)): z = u − λv with M u = F_F,
    M v = e, λ = eᵀu / eᵀv, and gᵀd = −F_Fᵀz. ΔF = t D_{·F} z over all n points; the new α_F lie
    in [0, C], the blocking one at its bound. A step blocked before 1 / ``CONTINUE_FROM`` of the
    way goes on along the face with the blocking points held (:func:`continue_blocked`).
    """
    k = free.size
    # From ``FORTRAN_GATHER_FROM`` points on, M Fortran-ordered: Mᵀ's rows gathered from D_F's
    # columns (Mᵀ[j, i] = D_F[i, free[j]]), so dposv factors it in place, not f2py's copy of a
    # C-ordered M. The same entries either way (not M's mirror, which D, symmetric only to float32
    # rounding, would change in bits); "clip" skips take's check of indices known in range
    M = D_F.T[free].T if k >= FORTRAN_GATHER_FROM else D_F.take(free, 1, None, "clip")
    np.subtract(1.0, M, out=M)  # K_FF
    M.ravel("K")[:: k + 1] = 1.0 + RIDGE * k  # K_ii = 1; M is contiguous, so a view
    rhs = rows_and_ones(k).copy()  # rows F_F and e: rhs.T is the Fortran-ordered k × 2 right-hand
    rhs[0] = F_F  # side (a copy and one row: ~1,500 instructions less than empty and two rows)
    # dpotrf and dpotrs in one LAPACK call: one f2py wrapper (~3 µs) fewer; arguments by position
    # (lower, overwrite_a, overwrite_b)
    factor, uv, info = dposv(M, rhs.T, 1, 1, 1)
    if info != 0:
        return None
    sum_u, sum_v = np.add.reduce(uv).tolist()  # ndarray.sum's ufunc, not its Python
    u_v = uv.T  # rows u and v (not `u, v = uv.T`: unpacking ends by a formatted IndexError)
    z = u_v[1] * (sum_u / sum_v)
    np.subtract(u_v[0], z, out=z)  # eᵀz = 0
    if not F_F.dot(z) > 0.0:  # gᵀd < 0 (ndarray.dot: ~0.6 µs less than @ on |F| values)
        return None
    d = y_F * z
    # t d ≤ C − α where d > 0 and ≥ −α where d ≤ 0: t ≤ 1 / max(d / room), room ≠ 0 on F. Both
    # rooms at once: d / (C − α) ≥ 0 ≥ d / (−α) where d ≥ 0 and the reverse where d ≤ 0, so the
    # largest of the 2|F| ratios is the largest d / room, in row 0 when the point rises (exact
    # ties between a rising and a falling point go to the rising one)
    ratio = d / (box_ends(C) - a_F)
    worst = int(ratio.argmax())
    r_max = ratio.item(worst)
    t = 1.0 if r_max <= 1.0 else 1.0 / r_max
    rises = worst < k
    if not rises:
        worst -= k
    blocked = -1
    if r_max >= CONTINUE_FROM:
        target = d + a_F  # the face's (ridged) minimiser, before d becomes the step
    new = d
    if t != 1.0:  # × 1 is exact: a call saved on unblocked steps
        new *= t
    new += a_F
    if r_max >= 1.0:
        blocked = worst
        new[worst] = C if rises else 0.0
    if r_max >= CONTINUE_FROM:
        new = continue_blocked(factor, u_v[1], sum_v, y_F, a_F, new, target, blocked, C)
    if r_max > UNCLIPPED_MAX:  # rounding only (np.clip costs 3x these two)
        np.maximum(new, 0.0, out=new)
        np.minimum(new, C, out=new)
    z = new - a_F
    z *= y_F
    return new, z.dot(D_F), blocked  # ndarray.dot: the same gemv as @, ~0.5 µs less


@np.errstate(divide="ignore", invalid="ignore")  # as a decorator: ~0.5 µs less than `with`
def continue_blocked(
    factor: np.ndarray,
    v: np.ndarray,
    sum_v: float,
    y_F: np.ndarray,
    a_F: np.ndarray,
    new: np.ndarray,
    target: np.ndarray,
    q: int,
    C: float,
) -> np.ndarray:
    """α_F after a blocked step goes on, piece by piece, with the points that blocked held at their
    bound: towards target ← target + (b_q − target_q) P_q / P_qq, then P ← P − P_q P_qᵀ / P_qq,
    from P = Y(M⁻¹ − v vᵀ / eᵀv)Y (Y = diag(y_F)), the face's projected inverse in α.

    ``factor`` is M's Cholesky factor (lower; its rows' signs are turned in place), v = M⁻¹e, ``a_F`` the step's start, ``new`` the
    first piece's end (α_q at its bound), ``target`` the face's minimiser and q the blocking
    point's place. Descent: with
    z = y_F ∘ (α − α_F), the objective moves by f(z) = ½ zᵀK_FF z − F_Fᵀz ≤ f_M(z) = ½ zᵀMz − F_Fᵀz
    (M = K_FF + εI). Each piece runs from the current z towards the minimiser of the convex f_M
    on the affine set {eᵀz = 0, z_H fixed} that holds it, so f_M falls along it (a convex
    quadratic on a segment ending at its minimiser), and the first piece, t z₀ with z₀ᵀMz₀ =
    F_Fᵀz₀ > 0, already gives f_M = −t(1 − t/2) z₀ᵀMz₀ < 0. So f(end) ≤ f_M(end) < 0 = f(α_F):
    the whole step lowers the objective. Each piece ends where the next point reaches a bound,
    after ``MAX_CONTINUED`` pieces, or at the minimiser."""
    k = new.size
    n = 2 * k
    # (YL)(YL)ᵀ = YMY: solving with YL gives Y M⁻¹ Y directly, M⁻¹'s entries with their signs
    # turned, to the bit (the same operations on the same magnitudes), without an outer product
    factor_t = factor.T  # C-ordered: factor's row i is its column i, so × y_F turns the rows
    factor_t *= y_F  # (~2,300 instructions less than factor *= y_F[:, None])
    yv = y_F * v
    columns = None if k < COLUMNS_FROM else ProjectedColumns(factor, yv, sum_v)
    if columns is None:
        inv, _ = dpotrs(factor, identity(k), 1)  # Fortran-ordered: dger updates it in place
        dger(-1.0 / sum_v, yv, yv, 1, 1, inv, 1, 1, 1)  # P; (incx, incy, a, overwrite x, y, a)
        # every vector twice over, [x; x] against the ends [C … C, 0 … 0]: the ratio's operands
        # have one shape (a broadcast costs ~1 µs more a call); P's rows twice, so its columns
        # are [P_q; P_q]
        P = np.concatenate((inv, inv))
    ends = doubled_ends(C, k).copy()
    new = np.concatenate((new, new))
    target = np.concatenate((target, target))
    held = [q]
    at = [new.item(q)]
    # a point on a bound by rounding alone (not held) has no room: its ratio is ±inf (it blocks
    # at once) or, not moving, nan (the continuation stops; the decorator's errstate keeps quiet)
    for _ in range(MAX_CONTINUED if columns is None else MAX_CONTINUED_COLUMNS):
        ends[q] = C + 1.0  # a held point's rooms are ≥ 1: its ratio 0 / room, not 0 / 0
        ends[q + k] = -1.0
        # dger must not read the column it writes: a copy
        col = P[:, q].copy() if columns is None else columns.column(q)
        p_qq = col.item(q)
        if not p_qq > 0.0:  # q's direction is already fixed (rounding)
            break
        daxpy(col, target, n, (at[-1] - target.item(q)) / p_qq)  # target_q = b_q
        step = target - new  # 0 on the held points (P's rows for them are 0)
        ratio = step / (ends - new)
        worst = int(ratio.argmax())
        r_max = ratio.item(worst)
        if r_max <= 1.0:
            new = target
            break
        if not r_max > 1.0:  # nan
            break
        daxpy(step, new, n, 1.0 / r_max)
        if columns is None:
            dger(-1.0 / p_qq, col, col[:k], 1, 1, P, 1, 1, 1)  # q held from now on: P_q = 0
        else:
            columns.hold(col, p_qq)
        rises = worst < k
        q = worst if rises else worst - k
        held.append(q)
        at.append(C if rises else 0.0)
    new = new[:k]
    y_free = y_F.copy()  # y on the points not held, 0 on the held
    for q, b in zip(held, at, strict=True):
        new[q] = b  # exactly at their bounds (the pieces move them by rounding)
        y_free[q] = 0.0
    # yᵀ(α − α_F) = 0 up to P's rounding, ~1e-9 C on ill-conditioned faces: spread what is left
    # over the points not held (SMO's pair steps keep yᵀα as it is; k − |H| ≥ 1 bar rounding)
    new -= y_free * ((y_F.dot(new) - y_F.dot(a_F)) / max(k - len(held), 1))
    return new


class ProjectedColumns:
    """Columns of the face's projected inverse P = Y(M⁻¹ − v vᵀ / eᵀv)Y, each made when a
    continued step first needs it (one ``dpotrs`` on e_q, 2|F|² flops) and brought past the
    points held so far (P ← P − P_h P_hᵀ / P_hh for each): :func:`continue_blocked`'s P on faces of
    ``COLUMNS_FROM`` points or more, where forming all of it (|F|³ flops) cost more than the
    Cholesky itself."""

    __slots__ = ("_factor", "_held", "_sum_v", "_yv")

    def __init__(self, factor: np.ndarray, yv: np.ndarray, sum_v: float) -> None:
        self._factor = factor  # YL: its solves give Y M⁻¹ Y
        self._yv = yv
        self._sum_v = sum_v
        self._held: list[tuple[np.ndarray, float]] = []

    def column(self, q: int) -> np.ndarray:
        """P's column q as held so far, twice over ([P_q; P_q])."""
        k = self._yv.size
        e = np.zeros(k)
        e[q] = 1.0
        col, _ = dpotrs(self._factor, e, 1, 1)  # (lower, overwrite_b): Y M⁻¹ Y e_q
        daxpy(self._yv, col, k, -self._yv.item(q) / self._sum_v)
        for h, p_hh in self._held:
            daxpy(h, col, k, -h.item(q) / p_hh)
        return np.concatenate((col, col))

    def hold(self, col: np.ndarray, p_qq: float) -> None:
        """Hold the point whose column (twice over) is ``col`` and diagonal entry ``p_qq``."""
        self._held.append((col[: col.size // 2], p_qq))
