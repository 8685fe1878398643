"""SMO on batched working sets (Wen et al. 2018, ThunderSVM) for the C-SVC dual.

Same problem and state as :mod:`.smo` (F = −y∘∇f, stop when m(α) − M(α) < tol), but each outer
iteration

1. picks q/2 new violators, alternately the largest F in I_up and the smallest F in I_low, and keeps
   the q/2 indices picked the iteration before (a FIFO of halves, which stops the working set from
   oscillating between two halves of the violators);
2. computes their q/2 kernel rows against all n points in one BLAS-3 product (float32 by default);
3. solves the q-variable subproblem exactly as SMO with WSS3 would, on the q × q block, until its own
   gap falls below max(tol, 0.1 × its initial gap) (ThunderSVM's local tolerance);
4. updates the gradient of all n points with one product F −= K_Bᵀ (y_B ∘ Δα_B).

The rows of the working set are the only kernel memory: q is chosen so that the (q, n) block fits in
``cache_mb``. The subproblem keeps α and F in float64; float32 rows move F by at most ~1e-7 relative
per update, far below tol.

rbf subproblems that run long (large C: to ``SUBPROBLEM_STEPS_PER_VARIABLE`` steps a variable) take
face Newton steps on their free points (``newton``), as SMO does below ``BATCHED_MIN_ROWS``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import daxpy

from ..kernels import BlockFunction
from .active_set import kkt_gap
from .face_newton import NEWTON_STREAK, apply_newton_step, face_newton_step, newton_wait
from .smo import (
    DENSE_NEWTON_FLOPS_PER_STEP,
    DIVERGENCE_CHECK_EVERY,
    MIN_RELATIVE_MARGIN,
    NEWTON_MAX_FREE,
    TAU,
    DualDivergence,
    SMOResult,
    default_max_iter,
    dual_objective,
    hull_distance_bound,
    intercept_rule,
    pair_update,
)

MAX_WORKING_SET = 1024
"""Upper bound on q: larger sets make the Python-level subproblem solve the bottleneck."""

SUBPROBLEM_STEPS_PER_VARIABLE = 10
"""Cap on pair updates per subproblem, times q: bounds the work between two global checks (with
C = inf a divergent subproblem would otherwise use up max_iter before the hull test runs)."""

NEWTON_START_PER_VARIABLE = 5
"""With ``newton``, a subproblem takes no face Newton step before this many pair steps per variable
(of ``SUBPROBLEM_STEPS_PER_VARIABLE``): subproblems that converge the usual way keep their bits.
make_classification(n, 8, 5 informative, flip_y=0.2) at C = 1 took one step from 1 and 2 (n =
8,000, 12,000) and from 3 (20,000); from 5, none on the grid's C = 1 sets at 8,000-20,000 rows (issue
27's 20k row too), while the large-C subproblems, which run to the cap, still take them."""

CHECK_ROWS_PER_SUPPORT_VECTOR = 8
"""A solve on float32 rows given the float64 block checks its end point in float64 (one float64
row a support vector) only once it has computed this many rows a support vector: the long,
large-C solves whose F drifts (up to 64 tol at C = 1,000). C = 1 solves (3-7 rows a support vector
on the grid) skip it and keep main's bits and time: checked, they cost 11-35 % more (issue 27's
20k row 0.25x → 0.29x SVC), and their end points were within tol but for one cell (1.01 tol)."""

REFRESH_ROWS_PER_SUPPORT_VECTOR = 16
"""A solve on float32 rows given the float64 block recomputes F from scratch (one float64 row a
support vector, ~2 float32 rows' cost) each time it has computed this many rows a support vector:
at most an eighth more rows. C = 1 fits end before the first (3-7 rows a support vector on the
grid); make_classification(8,000, 8, flip_y=0.2) at C = 1,000 took 2.6M pair updates on float32
rows to an end point 47 tol from the exact gap, then 2.3M more on float64 rows (no refresh);
refreshed every 10 or 40 outer iterations, 2.3-2.4M in all, every 8 rows a support vector 2.1M.
8 also fired at C = 10 (8,000 × 8), whose end point met tol without it, and moved its α."""

SHRINK_MIN_FRACTION = 0.05
"""Shrink only when at least this fraction of the active set goes (each shrink copies the rows)."""

LOCAL_TOL_FRACTION = 0.1
"""Subproblem tolerance: max(tol, this × the subproblem's initial gap) (ThunderSVM)."""


def working_set_size(n: int, cache_mb: float, itemsize: int) -> int:
    """Even q ≤ min(n, MAX_WORKING_SET) whose (q, n) block of ``itemsize`` bytes fits in cache_mb."""
    fit = int(cache_mb * 2**20 // (itemsize * max(n, 1)))
    q = min(n, MAX_WORKING_SET, max(fit, 4))
    return q if q == n else max(2, q - q % 2)


def up_low_masks(alpha: np.ndarray, y: np.ndarray, C: float) -> tuple[np.ndarray, np.ndarray]:
    """I_up = {y=+1, α<C} ∪ {y=−1, α>0} and I_low = {y=+1, α>0} ∪ {y=−1, α<C} (Keerthi et al. 2001)."""
    pos = y > 0
    below = alpha < C
    above = alpha > 0.0
    return (pos & below) | (~pos & above), (pos & above) | (~pos & below)


def select_violators(
    F: np.ndarray, up: np.ndarray, low: np.ndarray, exclude: np.ndarray, k: int
) -> np.ndarray:
    """k indices not in ``exclude``: about k/2 of largest F in I_up, the rest of smallest F in I_low."""
    up_score = np.where(up & ~exclude, F, -np.inf)
    n_up = min(k // 2 + k % 2, int(np.count_nonzero(up_score > -np.inf)))
    top = np.argpartition(-up_score, n_up - 1)[:n_up] if n_up > 0 else np.empty(0, np.intp)
    low_score = np.where(low & ~exclude, F, np.inf)
    low_score[top] = np.inf
    n_low = min(k - n_up, int(np.count_nonzero(low_score < np.inf)))
    bottom = np.argpartition(low_score, n_low - 1)[:n_low] if n_low > 0 else np.empty(0, np.intp)
    chosen = np.concatenate([top, bottom])
    if chosen.size < k:  # one side ran out: fill with any remaining indices of the other
        rest = np.flatnonzero(~exclude)
        rest = rest[~np.isin(rest, chosen)][: k - chosen.size]
        chosen = np.concatenate([chosen, rest])
    return chosen


def reconstruct_gradient(
    block: BlockFunction,
    F: np.ndarray,
    alpha: np.ndarray,
    y: np.ndarray,
    idx: np.ndarray,
    store: np.ndarray,
    dtype: type,
) -> int:
    """F_t = y_t − Σ_s α_s y_s K_st for t in ``idx`` (in place), by blocks of support rows; rows made.

    ``store`` is scratch memory; each block of rows s is (len(store) // len(idx), len(idx)).
    """
    if idx.size == 0:
        return 0
    support = np.flatnonzero(alpha > 0.0)
    chunk = max(1, store.size // idx.size)
    acc = y[idx].copy()
    for start in range(0, support.size, chunk):
        s = support[start : start + chunk]
        rows = store[: s.size * idx.size].reshape(s.size, idx.size)
        block(s, rows, idx)
        acc -= (alpha[s] * y[s]).astype(dtype) @ rows
    F[idx] = acc
    return int(support.size)


def solve_subproblem(
    K: np.ndarray,
    diag: np.ndarray,
    y: np.ndarray,
    F: np.ndarray,
    alpha: np.ndarray,
    C: float,
    tol: float,
    max_steps: int,
    floor_curvature: bool = True,
    local_fraction: float = LOCAL_TOL_FRACTION,
    newton: bool = False,
) -> tuple[int, float]:
    """SMO with WSS3 on a q-variable subproblem, in place on ``F`` and ``alpha``; (steps, first gap).

    ``K`` is the (q, q) kernel block, ``F`` = −y∘∇f restricted to the subproblem (the others' α
    are fixed, so they enter only through F). Stops when the subproblem's gap m − M falls below
    max(``tol``, ``local_fraction`` × its initial gap) or after ``max_steps`` pair updates. As in
    ``smo_distances``, F lives only in F + p_up and F + p_low (−inf outside I_up, +inf outside
    I_low), each moved by ``daxpy``, and WSS3's argmax b²/a over b > 0 is taken as argmax b / √a
    (b ≤ 0 gives ≤ 0; none positive stops the solve). A doubled [K | K], one ``daxpy`` a row for
    both, lost at q = 1,024: its copy each outer iteration cost more than the calls it saves.

    With ``newton`` (rbf: K_ii = 1), a face Newton step on the subproblem's free points
    (:func:`.face_newton.face_newton_step` on their rows of 1 − K) replaces a pair step as in
    :func:`.smo.smo_solve`: after ``NEWTON_STREAK`` pair steps in a row among free points, on at
    most ``NEWTON_MAX_FREE`` of them, once ``newton_wait`` steps (at
    ``DENSE_NEWTON_FLOPS_PER_STEP``) have passed since the last try, and never before
    ``NEWTON_START_PER_VARIABLE`` steps per variable. Each counts as one step.
    """
    inf = math.inf
    pos = y > 0
    F_up = np.where((pos & (alpha < C)) | (~pos & (alpha > 0.0)), F, -inf)
    F_low = np.where((pos & (alpha > 0.0)) | (~pos & (alpha < C)), F, inf)
    half_diag = 0.5 * diag + 0.5 * TAU
    const_diag = bool(np.all(diag == diag[0]))
    half_tau = 0.5 * TAU
    ys = y.tolist()
    diag_l = diag.tolist()
    buf = np.empty_like(F)
    score = np.empty_like(F)
    curv = np.empty_like(F)
    root = np.empty_like(F)
    m = np.empty(())  # scalars as 0-d arrays: a Python float costs numpy ~0.5 µs to convert
    c = np.empty(())
    local_tol = -1.0
    first_gap = 0.0
    steps = 0
    streak = 0  # pair steps in a row whose two points were free before the step
    streak_at = NEWTON_STREAK if newton else max_steps + 1
    newton_at = last_newton = NEWTON_START_PER_VARIABLE * K.shape[0]
    last_taken = True
    while steps < max_steps:
        if streak >= streak_at and steps >= newton_at:
            streak = 0
            free = np.flatnonzero((alpha > 0.0) & (alpha < C))
            k = free.size
            newton_at = last_newton + newton_wait(k, last_taken, DENSE_NEWTON_FLOPS_PER_STEP)
            if 2 <= k <= NEWTON_MAX_FREE and steps >= newton_at:
                step = face_newton_step(1.0 - K[free], free, y[free], alpha[free], F_up[free], C)
                last_newton, last_taken = steps, step is not None
                newton_at = steps + newton_wait(k, last_taken, DENSE_NEWTON_FLOPS_PER_STEP)
                if step is not None:
                    apply_newton_step(step, alpha, free.tolist(), (F_up, F_low), F_up, F_low, ys, C)
                    steps += 1
                    continue
        i = int(F_up.argmax())
        g_max = F_up.item(i)
        K_i = K[i]
        m[()] = g_max
        np.subtract(m, F_low, score)  # b_t = m − F_t over I_low, −inf outside
        if local_tol < 0.0:
            first_gap = float(score.max())
            local_tol = max(tol, local_fraction * first_gap)
        # half curvature (K_ii + K_tt) / 2 − K_it, floored at tau / 2
        if const_diag:
            c[()] = half_diag.item(0) + 0.5 * diag_l[i]
            np.subtract(c, K_i, curv)
        else:
            np.subtract(half_diag, K_i, curv)
            curv += 0.5 * diag_l[i]
        if floor_curvature:
            np.maximum(curv, half_tau, out=curv)
        np.sqrt(curv, out=root)
        np.divide(score, root, out=buf)
        j = int(buf.argmax())
        b_j = score.item(j)
        if b_j < local_tol and float(score.max()) < local_tol:
            break
        y_i, y_j = ys[i], ys[j]
        a_i_old, a_j_old = alpha.item(i), alpha.item(j)
        a_i, a_j = pair_update(a_i_old, a_j_old, y_i, y_j, b_j, 2.0 * curv.item(j), C)
        both_free = 0.0 < a_i_old < C and 0.0 < a_j_old < C
        streak = streak + 1 if both_free else 0
        alpha[i] = a_i
        alpha[j] = a_j
        step_i, step_j = -y_i * (a_i - a_i_old), -y_j * (a_j - a_j_old)
        K_j = K[j]
        daxpy(K_i, F_up, a=step_i)
        daxpy(K_j, F_up, a=step_j)
        daxpy(K_i, F_low, a=step_i)
        daxpy(K_j, F_low, a=step_j)
        # i was in I_up and j in I_low: their new F are F_up[i] and F_low[j]
        for t, a_t, y_t, F_t in ((i, a_i, y_i, F_up.item(i)), (j, a_j, y_j, F_low.item(j))):
            if y_t > 0:
                F_up[t] = -inf if a_t >= C else F_t
                F_low[t] = inf if a_t <= 0.0 else F_t
            else:
                F_up[t] = -inf if a_t <= 0.0 else F_t
                F_low[t] = inf if a_t >= C else F_t
        steps += 1
    np.copyto(F, np.where(np.isfinite(F_up), F_up, F_low))  # every t is in I_up or I_low
    return steps, first_gap


def solve_batches(
    block: BlockFunction,
    diag: np.ndarray,
    y: np.ndarray,
    C: float,
    alpha: np.ndarray,
    F: np.ndarray,
    store: np.ndarray,
    q: int,
    tol: float,
    max_iter: int,
    floor_curvature: bool,
    shrinking: bool,
    newton: bool,
    exact_block: BlockFunction | None = None,
) -> tuple[int, int, bool]:
    """:func:`batched_smo_solve`'s outer loop from (α, F), in place; (pair updates, rows, converged).

    ``store`` holds the working set's q rows over the active columns (its dtype is the rows'). With
    ``exact_block`` (float64), F is recomputed from scratch from the support vectors' rows
    whenever ``REFRESH_ROWS_PER_SUPPORT_VECTOR`` rows a support vector have been computed since.
    """
    n = y.shape[0]
    dtype = store.dtype.type
    half = q // 2
    whole = q == n  # the subproblem is the whole problem: one solve to tol
    shrinking = shrinking and not whole
    hard = math.isinf(C)
    active = np.arange(n)  # not shrunk (Joachims 1999; libsvm's shrinking)
    position = np.arange(n)  # of each index in ``active``
    ws = np.empty(q, dtype=np.intp)
    in_ws = np.zeros(n, dtype=bool)
    ws_len = 0
    # K_BB by its own product of q × q: gathering the q columns from the rows' block was
    # scattered reads as slow as the kernel rows themselves at 20k rows
    # with exact_block also the scratch of F's refresh: at least 8 of its float64 rows
    kbb = np.empty(q * q if exact_block is None else max(q * q, 8 * n))
    kbb32 = np.empty(q * q, dtype=dtype)
    kbb_valid = False
    n_iter = n_rows = n_outer = stalled = fresh_rows = 0
    converged = False
    min_distance = -1.0
    while n_iter < max_iter:
        n_act = active.size
        a_A, F_A = alpha[active], F[active]
        up, low = up_low_masks(a_A, y[active], C)
        m = float(F_A[up].max(initial=-np.inf))
        M = float(F_A[low].min(initial=np.inf))
        if m - M < tol:
            if n_act == n:
                converged = True
                break
            # the active problem is solved: exact F of the shrunk, then go on with everything
            inactive = np.flatnonzero(position < 0)
            n_rows += reconstruct_gradient(block, F, alpha, y, inactive, store, dtype)
            active, position = np.arange(n), np.arange(n)
            in_ws[:] = False
            ws_len = 0
            shrinking = False
            continue
        compact: tuple[np.ndarray, int] | None = None
        if shrinking and n_outer > 0:
            # at a bound, in only one of I_up / I_low, and beyond the other side's extreme
            drop = (up & ~low & (F_A < M)) | (low & ~up & (m < F_A))
            drop &= ~in_ws[active]
            n_drop = int(np.count_nonzero(drop))
            if n_drop >= SHRINK_MIN_FRACTION * n_act:
                keep = ~drop
                n_keep = n_act - n_drop
                compact = (np.flatnonzero(keep), n_act)  # the rows, once the new ones are known
                active = active[keep]
                position[:] = -1
                position[active] = np.arange(n_keep)
                n_act = n_keep
                F_A, up, low = F_A[keep], up[keep], low[keep]
        rows = store[: q * n_act].reshape(q, n_act)
        cols = None if n_act == n else active
        if ws_len == 0:
            new = active[select_violators(F_A, up, low, in_ws[active], q)]
            slots = slice(0, new.size)
            ws_len = new.size
        elif whole:
            new, slots = np.empty(0, np.intp), slice(0, 0)
        else:
            lo = half * (n_outer % 2)  # FIFO of halves: overwrite the older one
            in_ws[ws[lo : lo + half]] = False
            new = active[select_violators(F_A, up, low, in_ws[active], half)]
            slots = slice(lo, lo + new.size)
        if compact is not None:
            # each kept row's columns in place, front to back (a row's new place never reaches a
            # later row's old one); the rows about to be replaced are skipped
            kept_cols, n_old = compact
            for s in range(ws_len):
                if not slots.start <= s < slots.stop:
                    src = store[s * n_old : (s + 1) * n_old]
                    np.take(src, kept_cols, out=store[s * n_act : (s + 1) * n_act])
        if new.size:
            ws[slots] = new
            in_ws[new] = True
            block(new, rows[slots], cols)
            n_rows += new.size
            fresh_rows += new.size
        if hard and min_distance < 0.0:
            spread = float(np.max(diag[ws[0]] + diag[active] - 2.0 * rows[0]))
            min_distance = MIN_RELATIVE_MARGIN * math.sqrt(max(spread, 0.0))
        B = ws[:ws_len]
        R = rows[:ws_len]
        if new.size or not kbb_valid:
            own = kbb32[: ws_len * ws_len].reshape(ws_len, ws_len)
            block(B, own, B)
            K_BB = kbb[: ws_len * ws_len].reshape(ws_len, ws_len)
            K_BB[...] = own
            kbb_valid = True
        alpha_B, F_B = alpha[B], F[B]
        steps, _ = solve_subproblem(
            K_BB,
            diag[B],
            y[B],
            F_B,
            alpha_B,
            C,
            tol,
            min(max_iter - n_iter, SUBPROBLEM_STEPS_PER_VARIABLE * ws_len),
            floor_curvature,
            0.0 if whole else LOCAL_TOL_FRACTION,
            newton,
        )
        n_iter += steps
        n_outer += 1
        coef = (alpha_B - alpha[B]) * y[B]
        alpha[B] = alpha_B
        nz = np.flatnonzero(coef)
        if nz.size and not whole:
            F_A -= coef.astype(dtype) @ R  # all rows: R[nz] would copy up to half the block
            F[active] = F_A
        F[B] = F_B  # the subproblem's float64 values of the same update
        if exact_block is not None and fresh_rows >= REFRESH_ROWS_PER_SUPPORT_VECTOR * int(
            np.count_nonzero(alpha)
        ):  # the rows' drift undone: F from scratch in float64, over K_BB's bytes
            n_rows += reconstruct_gradient(exact_block, F, alpha, y, np.arange(n), kbb, np.float64)
            kbb_valid = False
            fresh_rows = 0
        stalled = stalled + 1 if steps == 0 else 0
        if stalled >= 2:
            break
        if hard and n_outer % max(1, DIVERGENCE_CHECK_EVERY // 10) == 0:
            distance = hull_distance_bound(alpha, F, y)
            if distance < min_distance:
                raise DualDivergence(
                    f"after {n_iter} pair updates the distance between the convex hulls of the "
                    f"two classes in feature space is at most {distance:.3g}, below "
                    f"{MIN_RELATIVE_MARGIN:g} of the data's spread: they touch"
                )
    return n_iter, n_rows, converged


def batched_smo_solve(
    block: BlockFunction,
    diag: np.ndarray,
    y: np.ndarray,
    C: float,
    tol: float = 1e-3,
    max_iter: int | None = None,
    cache_mb: float = 200.0,
    dtype: type = np.float32,
    ws_size: int | None = None,
    floor_curvature: bool = True,
    shrinking: bool = True,
    newton: bool = False,
    exact_block: BlockFunction | None = None,
) -> SMOResult:
    """Solve the C-SVC dual by SMO on batched working sets (see the module docstring).

    Parameters
    ----------
    block : callable
        ``block(idx, out)`` writes K(X[idx], X) into ``out`` of shape (len(idx), n) and ``dtype``.
    diag : ndarray of shape (n,)
        Kernel diagonal K_ii.
    y : ndarray of shape (n,)
        Targets in {+1, −1} (both present).
    C : float
        Box bound, > 0; ``math.inf`` is the hard margin.
    tol : float
        Stopping tolerance on m(α) − M(α).
    max_iter : int or None
        Cap on the total number of pair updates; None is libsvm's max(10⁷, 100 n).
    cache_mb : float
        Memory budget of the working set's kernel rows; sets q unless ``ws_size`` is given.
    dtype : numpy float type
        Precision of the kernel rows (float32: half the memory and time of float64).
    ws_size : int or None
        Working-set size q (even); None chooses it from n and ``cache_mb``.
    floor_curvature : bool
        As in :func:`.smo.smo_solve`.
    shrinking : bool
        Drop bound variables that cannot violate at the current extremes from the kernel rows and
        the gradient update; when the rest is solved, recompute their F exactly and go on with all.
    newton : bool
        Face Newton steps inside the subproblems (:func:`solve_subproblem`); only with finite C
        and K_ii = 1 (rbf). Memory beside the rows: the free points' rows of the q × q block and
        the step's k × k arrays (k ≤ q ≤ ``MAX_WORKING_SET``: at most ~16 MB whatever n).
    exact_block : callable or None
        The kernel's float64 ``block``, for a solve on float32 rows: the end point of a solve that
        computed at least ``CHECK_ROWS_PER_SUPPORT_VECTOR`` rows a support vector has its F
        computed from scratch in float64 from the support vectors' rows (over the store's bytes:
        one float64 row per support vector), and if its gap m − M is still
        ≥ ``tol`` (the float32 rows' drift: up to 64 tol at C = 1,000), the solve goes on from α
        on float64 rows (q halved, the same bytes) until it is below. An end point that meets
        ``tol`` keeps its α to the bit; its intercept and objective come from the exact F. Long
        solves also refresh F during the solve (``REFRESH_ROWS_PER_SUPPORT_VECTOR``).

    Returns
    -------
    SMOResult
        ``n_iter`` counts pair updates, ``n_kernel_rows`` the kernel rows computed.

    Raises
    ------
    DualDivergence
        With C = inf, when the classes' hulls in feature space (nearly) touch.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    diag = np.ascontiguousarray(diag, dtype=np.float64)
    n = y.shape[0]
    if max_iter is None:
        max_iter = default_max_iter(n)
    q = min(ws_size or working_set_size(n, cache_mb, np.dtype(dtype).itemsize), n)
    newton = newton and not math.isinf(C) and bool(np.all(diag == 1.0))

    alpha = np.zeros(n)
    F = y.copy()
    store = np.empty(q * n, dtype=dtype)  # the working set's rows over the active columns
    settings = (floor_curvature, shrinking, newton)
    narrow = exact_block if np.dtype(dtype).itemsize < 8 else None
    n_iter, n_rows, converged = solve_batches(
        block, diag, y, C, alpha, F, store, q, tol, max_iter, *settings, narrow
    )
    long_solve = n_rows >= CHECK_ROWS_PER_SUPPORT_VECTOR * int(np.count_nonzero(alpha))
    if narrow is not None and converged and long_solve:
        # F from scratch in float64, over the store's bytes: q // 2 float64 rows at a time
        wide = store[: store.size - store.size % 2].view(np.float64)
        n_rows += reconstruct_gradient(exact_block, F, alpha, y, np.arange(n), wide, np.float64)
        gap = kkt_gap(alpha, F, y, C)
        if gap >= tol:
            q_wide = min(n, max(2, (wide.size // n) - (wide.size // n) % 2), MAX_WORKING_SET)
            if wide.size < q_wide * n:  # a store of fewer than 4 rows (ws_size 2)
                wide = np.empty(q_wide * n)
            # shrinking only from 2 tol: a polish that starts nearer ends soon, and the end of a
            # shrunk solve recomputes the shrunk points' F on float64 rows (20,000 × 20, flip_y
            # 0.2, C = 1, when every solve was checked: 1.68x main's fit with it, 1.35x without);
            # from farther it pays (12,000 × 8, flip_y 0.2, C = 100: 0.80x of the unshrunk polish)
            polish = (floor_curvature, shrinking and gap >= 2 * tol, newton)
            more, rows, converged = solve_batches(
                exact_block, diag, y, C, alpha, F, wide, q_wide, tol, max_iter - n_iter, *polish
            )
            n_iter += more
            n_rows += rows
    return SMOResult(
        alpha=alpha,
        intercept=intercept_rule(alpha, F, y, C),
        objective=dual_objective(alpha, F, y),
        n_iter=n_iter,
        converged=converged,
        n_kernel_rows=n_rows,
    )
