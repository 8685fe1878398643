"""SMO for the C-SVC dual with second-order working-set selection (Fan, Chen & Lin 2005).

Solves  min_α ½ αᵀQα − eᵀα  s.t.  yᵀα = 0,  0 ≤ α ≤ C,  with Q_ij = y_i y_j K_ij and C possibly +inf
(hard margin). The state is kept as F = −y∘∇f, so that

* m(α) = max_{t ∈ I_up} F_t and M(α) = min_{t ∈ I_low} F_t (libsvm's stopping rule m − M < tol);
* after a step on (i, j), F −= y_i Δα_i K_i + y_j Δα_j K_j needs no multiplication by y.

I_up and I_low are additive penalty vectors (0 inside the set, ∓inf outside), so each selection is a
few fused numpy passes over preallocated buffers followed by one argmax.

With ``newton`` on a whole rbf distance matrix (``DenseKernelRows(D, distances=True)``: problems
past ``kernel_dual.DOUBLED_MAX_ROWS`` or on a one-vs-one block), face Newton steps join SMO's as in
``smo_distances`` (the same trigger and steps; on small faces the same wait too: tested), up to
``NEWTON_MAX_FREE`` free points, each step once SMO has taken its Cholesky's cost in steps
(``DENSE_NEWTON_FLOPS_PER_STEP``): moons(800) at C = 10 takes 193 iterations instead of 907, at
C = 100 329 instead of 3,901.
On a row cache of rbf rows (problems past ``kernel_dual.DENSE_MAX_ROWS``) the same steps come from
the cached rows (``cached_newton``): make_classification(3500, 8, flip_y=0.2) at C = 100 takes
26,012 iterations instead of 134,485 (3.3x SVC's CPU → 1.0x).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

import numpy as np
from scipy.linalg.blas import daxpy

from .cached_newton import cached_face_newton_step, cached_newton_applies
from .face_newton import NEWTON_STREAK, apply_newton_step, face_newton_step, newton_wait
from .kernel_cache import DenseKernelRows, KernelRowCache, RowFunction

TAU = 1e-12
"""Floor of the curvature a_ij; Fan, Chen & Lin (2005) section 4 (non-PSD kernels, e.g. sigmoid)."""

NEWTON_MAX_FREE = 1000
"""With ``newton``, no face Newton step while more points than this are free: a step costs its
Cholesky (k³ / 3 flops, ~0.1 s at k = 1,500), and faces past 1,000 points
(make_classification(3000, 20, flip_y=0.2) at C = 10 to 1,000: 1,400-1,600) gained nothing on
balance (C = 10 1.37x SVC against 1.07x without them). Was 100 while each step also formed all
of the face's projected inverse (another ~k³; ``face_newton.COLUMNS_FROM`` now makes its columns
one by one): make_classification(n, 8, 5 informative, flip_y=0.2) at C = 100 then took 8,700
SMO steps at 500 rows (4.3x SVC) on faces of 150-200 points; with them, 360. Below the cap,
``DENSE_NEWTON_FLOPS_PER_STEP`` decides."""

DENSE_NEWTON_FLOPS_PER_STEP = 300_000
"""With ``newton``, a face Newton step on k free points is tried only once SMO has taken
``face_newton.newton_wait(k, taken, this)`` = 1 + k³ / this steps since the start or the last try
(twice after a refused one): the step's Cholesky priced in SMO steps, so large faces are
factorised rarely and never before SMO has spent as much. ``smo_distances`` keeps
``face_newton.NEWTON_FLOPS_PER_STEP`` (its bits on the small sets). KernelSVM / SVC fit CPU,
median of 5 interleaved fits (no cap below 3,000), this at 30,000 (old cap) / 100,000 / 300,000
/ 1,000,000: make_classification(500, 8, 5 informative, flip_y=0.2) at C = 100 4.56 / 0.74 /
0.71 / 0.63; 3 classes of 700 rows at C = 100 5.96 / 0.87 / 0.93 / 0.91;
make_classification(1500, 8, flip_y=0.2) at C = 10 1.86 / 0.87 / 0.91 / 0.90;
make_classification(1500, 20) at C = 10 1.34 / 1.47 / 1.21 / 1.06, at C = 100 1.39 / 1.37 /
1.67 / 1.07, with flip_y=0.2 at C = 10 1.08 / 0.99 / 1.13 / 1.29: d = 20 sets of 1,500 rows
and more swing either way with the steps' timing, d = 8 and moons gain at every rate."""


@dataclass
class SMOResult:
    """Solution of the dual: α, intercept b (decision = Σ α_i y_i K(x_i, x) + b), and diagnostics."""

    alpha: np.ndarray
    intercept: float
    objective: float
    n_iter: int
    converged: bool
    n_kernel_rows: int
    grad: np.ndarray | None = None  # F = −y∘∇f at α (SMO's state, to resume from)


class DualDivergence(ArithmeticError):
    """The hard-margin dual is unbounded below: the data are not separable by the kernel."""


def default_max_iter(n: int) -> int:
    """libsvm's cap on SMO iterations: max(10⁷, 100 n)."""
    return max(10_000_000, 100 * n)


MIN_RELATIVE_MARGIN = 1e-4
"""Hard margin: separating margins below this fraction of the data radius count as not separable."""

DIVERGENCE_CHECK_EVERY = 50
"""Hard margin: iterations between two evaluations of the hull-distance bound."""


def hull_distance_bound(alpha: np.ndarray, F: np.ndarray, y: np.ndarray) -> float:
    """‖w(α)‖ / (Σα/2): an upper bound on the distance between the classes' convex hulls.

    With yᵀα = 0 each class carries Σα/2, so w(α)/(Σα/2) = Σ_{+} λ_i φ(x_i) − Σ_{−} μ_i φ(x_i) is a
    difference of two convex combinations; its norm bounds the hull distance 2ρ from above, and
    ‖w(α)‖² = αᵀQα = αᵀ(∇f + e) = αᵀ(e − y∘F). On separable data it never falls below 2ρ.
    """
    total = float(alpha.sum())
    ww = max(float(np.dot(alpha, 1.0 - y * F)), 0.0)
    return math.sqrt(ww) / (0.5 * total) if total > 0.0 else math.inf


def intercept_rule(alpha: np.ndarray, F: np.ndarray, y: np.ndarray, C: float) -> float:
    """libsvm's rho: mean of y_t∇f_t over free α_t, else the midpoint of its feasible interval; b = −rho.

    The mean as sum / count (what ``ndarray.mean`` computes, without its ~5 µs of Python), of F
    (y∘∇f = −F: the sum's rounding is symmetric, so rho is the same to the bit)."""
    free = (alpha > 0.0) & (alpha < C)
    n_free = int(np.count_nonzero(free))
    if n_free:
        rho = -float(np.add.reduce(F[free])) / n_free
    else:
        yG = -F
        at_upper = alpha >= C
        pos = y > 0
        # at upper bound: y=-1 bounds rho from above, y=+1 from below; at zero the opposite
        ub_mask = (at_upper & ~pos) | (~at_upper & pos)
        ub = float(yG[ub_mask].min()) if np.any(ub_mask) else math.inf
        lb = float(yG[~ub_mask].max()) if np.any(~ub_mask) else -math.inf
        rho = 0.5 * (ub + lb)
    return -rho


def dual_objective(alpha: np.ndarray, F: np.ndarray, y: np.ndarray) -> float:
    """½αᵀQα − eᵀα = ½ αᵀ(∇f − e) with ∇f = −y∘F.

    ∇f − e as −1 − y∘F in two calls, the bits of −y∘F − 1 (a sign flip is exact, a sum commutes)."""
    g = np.multiply(y, F)
    np.subtract(-1.0, g, out=g)
    return 0.5 * float(np.dot(alpha, g))


def pair_update(
    a_i: float, a_j: float, y_i: float, y_j: float, dF: float, a_ij: float, C: float
) -> tuple[float, float]:
    """New (α_i, α_j) of the two-variable subproblem, clipped to the box (Platt 1998; libsvm's update).

    ``dF`` = F_i − F_j (F = −y∘∇f) and ``a_ij`` the curvature K_ii + K_jj − 2K_ij (floored at tau).
    """
    if y_i != y_j:
        delta = y_i * dF / a_ij
        diff = a_i - a_j
        a_i, a_j = a_i + delta, a_j + delta
        if diff > 0.0:
            if a_j < 0.0:
                a_j, a_i = 0.0, diff
            if a_i > C:
                a_i, a_j = C, C - diff
        else:
            if a_i < 0.0:
                a_i, a_j = 0.0, -diff
            if a_j > C:
                a_j, a_i = C, C + diff
        return a_i, a_j
    delta = -y_i * dF / a_ij
    total = a_i + a_j
    a_i, a_j = a_i - delta, a_j + delta
    if total > C:
        if a_i > C:
            a_i, a_j = C, total - C
        if a_j > C:
            a_j, a_i = C, total - C
    else:
        if a_j < 0.0:
            a_j, a_i = 0.0, total
        if a_i < 0.0:
            a_i, a_j = 0.0, total
    return a_i, a_j


def smo_solve(
    row: RowFunction | None,
    diag: np.ndarray,
    y: np.ndarray,
    C: float,
    tol: float = 1e-3,
    max_iter: int | None = None,
    cache_mb: float = 200.0,
    floor_curvature: bool = True,
    start: SMOResult | None = None,
    cache: KernelRowCache | DenseKernelRows | None = None,
    stop_if: tuple[int, Callable[[np.ndarray], bool]] | None = None,
    newton: bool = False,
) -> SMOResult:
    """Solve the C-SVC dual by SMO with WSS3 (Fan, Chen & Lin 2005, Algorithm 1 and eq. (3.3)).

    Parameters
    ----------
    row : callable or None
        ``row(i, out)`` writes K(x_i, X) into ``out``; rows are cached in a bounded LRU block.
        None when ``cache`` is given (its rows are used).
    diag : ndarray of shape (n,)
        Kernel diagonal K_ii.
    y : ndarray of shape (n,)
        Targets in {+1, −1} (both present).
    C : float
        Box bound, > 0; ``math.inf`` is the hard margin.
    tol : float
        Stopping tolerance on m(α) − M(α).
    max_iter : int or None
        Iteration cap; None is libsvm's max(10⁷, 100 n).
    cache_mb : float
        Memory budget of the kernel-row cache.
    floor_curvature : bool
        Floor a_it = K_ii + K_tt − 2K_it at tau (needed for non-PSD kernels and rounding). False
        is allowed only when K_it ≤ (K_ii + K_tt) / 2 holds exactly for the computed rows (rbf with
        distances clipped at zero, K ≤ 1 = K_ii); it saves one pass per iteration.
    start : SMOResult or None
        Resume from its feasible ``alpha`` and ``grad`` (a run stopped by ``max_iter``) instead of
        α = 0; ``n_iter`` and ``n_kernel_rows`` then include its own.
    cache : KernelRowCache, DenseKernelRows or None
        A cache of ``row``'s rows to use (e.g. the stopped run's, to keep its rows) instead of a
        new one of ``cache_mb``. A ``DenseKernelRows`` of distances (rbf) holds D = 1 − K.
    stop_if : (int, callable) or None
        ``(k, test)``: after k steps, stop (unconverged) when ``test(α)`` is true, else go on.
    newton : bool
        With a ``DenseKernelRows`` of distances and finite C, a Newton step on the free face
        (:func:`.face_newton.face_newton_step`) replaces an SMO step after
        ``face_newton.NEWTON_STREAK`` SMO steps in a row among free points, on at most
        ``NEWTON_MAX_FREE`` points and once :func:`.face_newton.newton_wait` steps (at
        ``DENSE_NEWTON_FLOPS_PER_STEP``) have passed since the start or the last try; each counts
        as one iteration, the stopping rule is SMO's. The same on a ``KernelRowCache`` of an rbf
        kernel (``floor_curvature`` false, K_ii = 1), from its cached rows
        (:func:`.cached_newton.cached_face_newton_step`). Ignored otherwise.

    Returns
    -------
    SMOResult

    Raises
    ------
    DualDivergence
        With C = inf, when :func:`hull_distance_bound` falls below ``MIN_RELATIVE_MARGIN`` times the
        data's spread in feature space: the classes' hulls (nearly) intersect, the dual is unbounded.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    diag = np.ascontiguousarray(diag, dtype=np.float64)
    n = y.shape[0]
    if max_iter is None:
        max_iter = default_max_iter(n)
    hard = math.isinf(C)
    min_distance = -1.0  # hard margin: set from the data's spread at the first row
    if cache is None:
        if row is None:
            raise ValueError("smo_solve needs a row function or a cache.")
        cache = KernelRowCache(row, n, cache_mb)
    rows_before = cache.n_computed

    inf = math.inf
    if start is None or start.grad is None:
        alpha = [0.0] * n  # a list: scalar reads and writes are several times cheaper than numpy's
        F = y.copy()  # α = 0: ∇f = −e, so F = −y∘∇f = y
        # α = 0: y=+1 is in I_up only, y=−1 in I_low only
        up_pen = np.where(y > 0, 0.0, -inf)
        low_pen = np.where(y > 0, inf, 0.0)
    else:
        alpha = start.alpha.tolist()
        F = start.grad.copy()
        pos = y > 0
        up_pen = np.where((pos & (start.alpha < C)) | (~pos & (start.alpha > 0.0)), 0.0, -inf)
        low_pen = np.where((pos & (start.alpha > 0.0)) | (~pos & (start.alpha < C)), 0.0, inf)
    ys = y.tolist()
    diag_l = diag.tolist()
    const_diag = bool(np.all(diag == diag[0]))
    half_d0 = 0.5 * float(diag[0])
    half_diag = 0.5 * diag
    half_tau = 0.5 * TAU
    if not floor_curvature:
        # K_it ≤ (K_ii + K_tt) / 2 holds exactly, so shifting by tau / 2 keeps every a_it ≥ tau
        half_diag = half_diag + half_tau
        half_d0 += half_tau
    get_row = cache.row
    # rows of curvatures D_it = 1 − K_it (rbf, K_ii = 1): a row is a_it / 2 itself, and
    # F += c K_t = F + c − c D_t keeps the common shift Σc aside (WSS and the pair update only use
    # differences of F): one numpy call less a step
    distances = cache.distances
    shift = 0.0
    # face Newton steps (rbf on a whole D, finite C): smo_distances' trigger, a wait of their own
    streak_at = max_iter + 1
    D = None  # face Newton steps from a row cache (``cached_newton``) when None
    if newton and distances and not hard and isinstance(cache, DenseKernelRows):
        streak_at = NEWTON_STREAK
        D = cache.K
    elif newton and not hard and cached_newton_applies(cache, diag, floor_curvature):
        streak_at = NEWTON_STREAK
    streak = 0  # SMO steps in a row whose two points were free before the step
    newton_at = 0  # the earliest step of the next Newton step
    last_newton, last_taken = 0, True  # the last Newton step's iteration (the start) and outcome

    buf = np.empty(n)
    score = np.empty(n)
    curv = np.empty(n)
    n_iter = 0
    converged = False
    stop_at = stop_if[0] if stop_if is not None else -1
    while n_iter < max_iter:
        if streak >= streak_at and n_iter >= newton_at:  # before the selection
            streak = 0
            free = (up_pen >= low_pen).nonzero()[0]  # 0 ≥ 0 only in I_up and I_low
            k = free.size
            # a step on k points once SMO has taken its cost in steps since the last attempt
            newton_at = last_newton + newton_wait(k, last_taken, DENSE_NEWTON_FLOPS_PER_STEP)
            if 2 <= k <= NEWTON_MAX_FREE and n_iter >= newton_at:
                listed = free.tolist()
                a_F = np.array(itemgetter(*listed)(alpha))
                step = (
                    face_newton_step(D[free], free, y[free], a_F, F[free] + shift, C)
                    if D is not None
                    else cached_face_newton_step(cache, free, y[free], a_F, F[free], C)
                )
                last_newton, last_taken = n_iter, step is not None
                newton_at = n_iter + newton_wait(k, last_taken, DENSE_NEWTON_FLOPS_PER_STEP)
                if step is not None:
                    apply_newton_step(step, alpha, listed, (F,), up_pen, low_pen, ys, C)
                    n_iter += 1
                    if n_iter == stop_at and stop_if is not None and stop_if[1](np.array(alpha)):
                        break
                    continue
        # i = argmax_{I_up} F, the value m(α)
        np.add(F, up_pen, buf)
        i = int(buf.argmax())
        g_max = buf.item(i)
        K_i = get_row(i)
        # b_t = m − F_t over I_low (−inf outside); its max is m(α) − M(α)
        np.subtract(g_max, F, score)
        score -= low_pen
        # half curvature a_it / 2 = (K_ii + K_tt) / 2 − K_it, floored at tau / 2
        if distances:
            curv = K_i  # D_it ≥ tau / 2, read only
        elif const_diag:
            np.subtract(half_d0 + 0.5 * diag_l[i], K_i, curv)
        else:
            np.subtract(half_diag, K_i, curv)
            curv += 0.5 * diag_l[i]
        if hard and min_distance < 0.0:
            # spread = max_t ‖φ(x_t) − φ(x_i)‖, within a factor 2 of the feature-space diameter
            min_distance = MIN_RELATIVE_MARGIN * math.sqrt(max(2.0 * float(curv.max()), 0.0))
        if floor_curvature and not distances:
            np.maximum(curv, half_tau, out=curv)
        # j = argmax b_t² / a_it over violating t (WSS3)
        np.maximum(score, 0.0, out=buf)
        buf *= buf
        buf /= curv
        j = int(buf.argmax())
        # m − M ≥ b_j, so the full stopping test is needed only when b_j is below tol
        if score.item(j) < tol and float(score.max()) < tol:
            converged = True
            break
        K_j = get_row(j)  # K_i stays valid: the evicted row is the least recently used one

        y_i, y_j = ys[i], ys[j]
        a_ij = 2.0 * curv.item(j)
        a_i_old, a_j_old = alpha[i], alpha[j]
        streak = streak + 1 if 0.0 < a_i_old < C and 0.0 < a_j_old < C else 0
        F_i, F_j = g_max, F.item(j)
        a_i, a_j = pair_update(a_i_old, a_j_old, y_i, y_j, F_i - F_j, a_ij, C)
        alpha[i] = a_i
        alpha[j] = a_j
        c_i, c_j = -y_i * (a_i - a_i_old), -y_j * (a_j - a_j_old)
        if distances:
            daxpy(K_i, F, a=-c_i)
            daxpy(K_j, F, a=-c_j)
            shift += c_i + c_j
        else:
            daxpy(K_i, F, a=c_i)
            daxpy(K_j, F, a=c_j)
        # membership of I_up / I_low for the two changed coordinates
        if y_i > 0:
            up_pen[i] = -inf if a_i >= C else 0.0
            low_pen[i] = inf if a_i <= 0.0 else 0.0
        else:
            up_pen[i] = -inf if a_i <= 0.0 else 0.0
            low_pen[i] = inf if a_i >= C else 0.0
        if y_j > 0:
            up_pen[j] = -inf if a_j >= C else 0.0
            low_pen[j] = inf if a_j <= 0.0 else 0.0
        else:
            up_pen[j] = -inf if a_j <= 0.0 else 0.0
            low_pen[j] = inf if a_j >= C else 0.0
        n_iter += 1
        if n_iter == stop_at and stop_if is not None and stop_if[1](np.array(alpha)):
            break
        if hard and n_iter % DIVERGENCE_CHECK_EVERY == 0:
            distance = hull_distance_bound(np.array(alpha), F + shift, y)
            if distance < min_distance:
                raise DualDivergence(
                    f"after {n_iter} iterations the distance between the convex hulls of the two "
                    f"classes in feature space is at most {distance:.3g}, below "
                    f"{MIN_RELATIVE_MARGIN:g} of the data's spread: they touch"
                )

    alpha = np.array(alpha)
    F += shift
    before = (start.n_iter, start.n_kernel_rows) if start is not None else (0, 0)
    return SMOResult(
        alpha=alpha,
        intercept=intercept_rule(alpha, F, y, C),
        objective=dual_objective(alpha, F, y),
        n_iter=before[0] + n_iter,
        converged=converged,
        n_kernel_rows=before[1] + cache.n_computed - rows_before,
        grad=F,
    )
