"""A primal-dual active-set (semismooth Newton) solver of the C-SVC dual for small problems.

Solves the problem of :mod:`.smo`, min ½αᵀQα − eᵀα s.t. yᵀα = 0, 0 ≤ α ≤ C (C finite), with the
primal-dual active-set strategy of Hintermüller, Ito & Kunisch (2003), "The primal-dual active set
strategy as a semismooth Newton method" (SIAM J. Optim. 13(3)), applied to SVMs as in Scheinberg
(2006, JMLR 7) and Vishwanathan, Smola & Murty (2003, SimpleSVM). Each round

1. fixes α_L = 0 and α_U = C and solves the equality-constrained problem on the free set F exactly,
   from the KKT system [Q_FF y_F; y_Fᵀ 0][α_F; b] = [e − Q_FU C e; −C y_Uᵀe] by one Cholesky
   factorisation of Q_FF (|F| × |F|; b by the Schur complement y_Fᵀ Q_FF⁻¹ y_F);
2. computes all margins y_t f(x_t) − 1 with one product against the kernel rows of F ∪ U;
3. moves free points outside the box to their bound and violating bound points (margin violation
   beyond tol / 4) into F; at most max(``MIN_ENTERING``, |F|) of the points at zero enter per round,
   the most violating first (a cold start would otherwise make F nearly everything). When a round
   changes no fewer points than the one before, the number of changes allowed is halved and the
   largest ones (margin violation, or distance outside the box) are kept: plain PDAS cycles on
   problems whose Q is far from an M-matrix (still seen on 3-feature toy problems: then SMO runs).

It stops when no set changes; the result then meets SMO's stopping rule m(α) − M(α) < tol, which is
checked on the last round's gradients (from the kernel rows at the final α_F and C on U). The first
F is ``SEED_PER_CLASS`` points of each class. Only kernel rows of points that ever enter F ∪ U are
computed, in one block per round, and kept (float64) within ``cache_mb``. A round reads them in
place: K_FF and Σ_U C y_u K(x_u, x_F) from their columns of F (kept rows × |F|), the decision
values by one product of all kept rows with their coefficients (y_t α_t on F, C y_u on U, 0 on rows
that left), not from F's rows gathered into a |F| × n block (~40 µs at |F| = 110, n = 467) and a
running sum over U. On make_classification(700, 13, 3 classes)' pairs at C = 10 (5-7 rounds on
92-163 free points) the active sets took 0.89x the time.

The solver returns ``None`` (the caller then runs SMO) when it cannot finish: Q_FF not numerically
positive definite (duplicates with a linear or polynomial kernel, indefinite kernels), more rounds
than ``MAX_ROUNDS`` (cycling), the rows not fitting in ``cache_mb``, or a final check that fails.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dposv

from ..kernels import BlockFunction
from ..workspace import Empty
from .smo import SMOResult, dual_objective, intercept_rule

SEED_PER_CLASS = 20
"""Points of each class, evenly spaced through the data, that form the first free set. Measured on
breast cancer and digits pairs: 5 to 40 give the same rounds within one or two, and a start from
20 SMO steps saves 2-3 rounds but costs more than they do (its 40 kernel rows come one by one)."""

MAX_ROUNDS = 30
"""Active-set rounds before giving up (breast cancer needs 13, digits pairs 7 to 9)."""

MIN_ENTERING = 20
"""Points at zero allowed into F per round: at least this many, else |F|."""

MIN_PIVOT = 1e-10
"""Smallest squared Cholesky pivot of Q_FF, relative to its largest diagonal entry, that is trusted
(a pivot is the variance of a point's feature vector given the other free points': near-duplicates
give tiny ones). Ill-conditioning it misses shows in the final check on fresh gradients."""


class KernelRowStore:
    """Kernel rows K(x_i, X) of the points that were asked for, computed in blocks and kept.

    Parameters
    ----------
    block : callable
        ``block(idx, out)`` writes K(X[idx], X) into ``out`` (len(idx), n) of dtype ``dtype``.
    n : int
        Number of training points.
    capacity : int
        Most rows kept (float64); asking for more makes :meth:`ensure` return False.
    dtype : type
        dtype of the blocks ``block`` writes (float32 rbf blocks are converted when kept).
    empty : callable
        Makes the kept rows (``np.empty``, or a workspace's).
    """

    def __init__(
        self, block: BlockFunction, n: int, capacity: int, dtype: type, empty: Empty = np.empty
    ) -> None:
        self.block = block
        self.dtype = dtype
        self.empty = empty
        self.rows = empty((max(capacity, 1), n))
        self.slot = np.full(n, -1, dtype=np.int64)
        self.filled = 0

    def ensure(self, idx: np.ndarray) -> bool:
        """Compute the rows of ``idx`` not yet kept, in one block; False if they do not fit."""
        new = idx[self.slot[idx] < 0]
        if new.size == 0:
            return True
        stop = self.filled + new.size
        if stop > self.rows.shape[0]:
            return False
        if self.dtype is np.float64:
            self.block(new, self.rows[self.filled : stop])
        else:
            out = np.empty((new.size, self.rows.shape[1]), dtype=self.dtype)
            self.block(new, out)
            self.rows[self.filled : stop] = out
        self.slot[new] = np.arange(self.filled, stop)
        self.filled = stop
        return True


def kkt_gap(alpha: np.ndarray, F: np.ndarray, y: np.ndarray, C: float) -> float:
    """m(α) − M(α) = max_{I_up} F_t − min_{I_low} F_t with F = −y∘∇f (Keerthi et al. 2001)."""
    pos = y > 0
    up = (pos & (alpha < C)) | (~pos & (alpha > 0.0))
    low = (pos & (alpha > 0.0)) | (~pos & (alpha < C))
    return float(F[up].max(initial=-np.inf) - F[low].min(initial=np.inf))


LOWER = 1
"""The Newton steps factor the lower triangle (``dposv(lower=1)`` on the F-ordered transpose of
the symmetric C-ordered matrix: no copy): OpenBLAS's lower Cholesky with its solve took 0.79-0.83x
the time of the upper one at |F| = 85-200 (24 / 32 / 58 / 146 µs against 29 / 39 / 74 / 180 µs at
85 / 100 / 130 / 200), the free sets of the lockstep rounds; the same system, other rounding."""


def newton_step(
    Q_FF: np.ndarray, rhs: np.ndarray, y_F: np.ndarray, c: float
) -> tuple[np.ndarray, float] | None:
    """(α_F, b) solving Q_FF α_F + b y_F = rhs, y_Fᵀα_F = c by Cholesky and the Schur complement.

    α_F = u − b v with Q_FF u = rhs, Q_FF v = y_F and b = (y_Fᵀu − c) / (y_Fᵀv); None when Q_FF is
    not numerically positive definite (a squared pivot below ``MIN_PIVOT`` times max Q_ii).
    """
    scale = float(np.maximum.reduce(Q_FF.diagonal()))  # no ndarray.max wrapper
    b_F = np.empty((rhs.size, 2), order="F")
    b_F[:, 0] = rhs
    b_F[:, 1] = y_F
    # Q_FF symmetric: .T is F-ordered (no copy); the lower triangle (LOWER)
    L, uv, info = dposv(Q_FF.T, b_F, lower=LOWER, overwrite_a=1, overwrite_b=1)
    if info != 0 or not float(np.minimum.reduce(L.diagonal())) ** 2 >= MIN_PIVOT * scale:
        return None
    u, v = uv[:, 0], uv[:, 1]
    b = (float(y_F @ u) - c) / float(y_F @ v)
    return u - b * v, b


def newton_step_kernel(
    K_FF: np.ndarray, r: np.ndarray, c: float
) -> tuple[np.ndarray, float] | None:
    """(z, b) solving K_FF z + b e = r, eᵀz = c: :func:`newton_step`'s system multiplied by
    diag(y_F), in z = y_F ∘ α_F (r = y_F ∘ rhs), so K_FF needs no scaling by y_F y_Fᵀ (two passes
    over |F|² values a round). The same pivot test; z = u − b v with K_FF u = r, K_FF v = e and
    b = (eᵀu − c) / (eᵀv)."""
    scale = float(np.maximum.reduce(K_FF.diagonal()))  # no ndarray.max wrapper
    rhs = np.empty((r.size, 2), order="F")
    rhs[:, 0] = r
    rhs[:, 1] = 1.0
    # factor and solve in one LAPACK call; the pivot test reads the factor it leaves (a refused
    # step's solve is wasted, ~2 µs). See LOWER for the triangle.
    L, uv, info = dposv(K_FF.T, rhs, lower=LOWER, overwrite_a=1, overwrite_b=1)  # .T: F-order
    if info != 0 or not float(np.minimum.reduce(L.diagonal())) ** 2 >= MIN_PIVOT * scale:
        return None
    sum_u, sum_v = np.add.reduce(uv, axis=0).tolist()
    b = (sum_u - c) / sum_v
    z = uv[:, 1] * b
    np.subtract(uv[:, 0], z, out=z)
    return z, b


def active_set_solve(
    block: BlockFunction,
    diag: np.ndarray,
    y: np.ndarray,
    C: float,
    tol: float = 1e-3,
    cache_mb: float = 200.0,
    block_dtype: type = np.float64,
    start: SMOResult | None = None,
    empty: Empty = np.empty,
) -> SMOResult | None:
    """Solve the C-SVC dual (finite C) by primal-dual active sets; None when it cannot finish.

    Parameters
    ----------
    block : callable
        ``block(idx, out)`` writes the kernel rows K(X[idx], X) into ``out`` of ``block_dtype``.
    diag : ndarray of shape (n,)
        Kernel diagonal K_ii.
    y : ndarray of shape (n,)
        Targets in {+1, −1} (both present).
    C : float
        Box bound, finite and > 0.
    tol : float
        Stopping tolerance on m(α) − M(α), as SMO's.
    cache_mb : float
        Memory budget of the kept (float64) kernel rows, half of it theirs (as when F's rows were
        gathered into a second buffer: the same give-ups), the rest for a round's columns.
    block_dtype : type
        dtype of ``block``'s output.
    start : SMOResult or None
        A short SMO run: the first sets are its free points and those at C (the seeds are added
        when it has fewer than two free points).
    empty : callable
        Makes the kept rows (``np.empty``, or a ``workspace.workspace``'s); none is returned.

    Returns
    -------
    SMOResult or None
        ``n_iter`` counts the active-set rounds.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = y.size
    store = KernelRowStore(block, n, min(n, int(cache_mb * 2**20 // (16 * n))), block_dtype, empty)
    if store.rows.shape[0] < 2 * SEED_PER_CLASS:
        return None
    state = np.zeros(n, dtype=np.int8)  # 0: α = 0, 1: free, 2: α = C
    if start is not None:
        state[start.alpha > 0.0] = 1
        state[start.alpha >= C] = 2
    if np.count_nonzero(state == 1) < 2:
        for members in (np.flatnonzero(y > 0), np.flatnonzero(y < 0)):
            picks = np.linspace(0, members.size - 1, min(SEED_PER_CLASS, members.size))
            state[members[picks.astype(np.int64)]] = 1
    seen: set[bytes] = set()  # the sets of every round: a repeat is a cycle
    upper = np.flatnonzero(state == 2)
    if upper.size and not store.ensure(upper):
        return None
    # coefficients of the kept rows: f = w @ rows, w = C y_u on U and y_t α_t on F (0 elsewhere)
    w = np.zeros(store.rows.shape[0])
    theta = 0.25 * tol
    budget, last_changes = n, n + 1
    for rounds in range(1, MAX_ROUNDS + 1):
        key = state.tobytes()
        if key in seen:
            return None
        seen.add(key)
        free = np.flatnonzero(state == 1)
        if free.size == 0 or not store.ensure(free):
            return None
        kept = store.rows[: store.filled]
        cols = kept.take(free, axis=1)  # K(x_kept, x_F): no |F| x n gather of F's rows
        slot_F = store.slot[free]
        y_F = y[free]
        Q_FF = cols.take(slot_F, axis=0)
        Q_FF *= y_F[:, None]
        Q_FF *= y_F[None, :]
        w_kept = w[: store.filled]
        w_kept[:] = 0.0
        w_kept[store.slot[upper]] = C * y[upper]
        f_U_F = w_kept @ cols  # Σ_U C y_u K(x_u, x_F), from the rows as they are
        step = newton_step(Q_FF, 1.0 - y_F * f_U_F, y_F, -C * float(y[upper].sum()))
        if step is None:
            return None
        alpha_F, b = step
        w_kept[slot_F] = y_F * alpha_F
        f = w_kept @ kept  # decision values without the intercept
        violation = y * (f + b) - 1.0  # margin residual; 0 on F up to rounding
        violation[state == 0] *= -1.0
        violation[free] = np.maximum(-alpha_F, alpha_F - C)  # free: distance outside the box
        new_state = state.copy()
        new_state[free[alpha_F < 0.0]] = 0
        new_state[free[alpha_F > C]] = 2
        new_state[upper[violation[upper] > theta]] = 1
        entering = np.flatnonzero(violation > theta)
        entering = entering[state[entering] == 0]
        limit = max(MIN_ENTERING, free.size)
        if entering.size > limit:
            entering = entering[np.argpartition(-violation[entering], limit)[:limit]]
        new_state[entering] = 1
        changed = np.flatnonzero(new_state != state)
        if changed.size >= last_changes:  # no progress: damp, keep the largest changes only
            budget = max(1, budget // 2)
        last_changes = changed.size
        if changed.size > budget:
            keep = changed[np.argpartition(-violation[changed], budget)[:budget]]
            undo = np.setdiff1d(changed, keep, assume_unique=True)
            new_state[undo] = state[undo]
        if np.array_equal(new_state, state):
            return _finish(store, state, alpha_F, f, y, C, tol, rounds)
        # U's new points come from F and its rows are kept: nothing to compute for them
        state, upper = new_state, np.flatnonzero(new_state == 2)
    return None


def _finish(
    store: KernelRowStore,
    state: np.ndarray,
    alpha_F: np.ndarray,
    f: np.ndarray,
    y: np.ndarray,
    C: float,
    tol: float,
    n_iter: int,
) -> SMOResult | None:
    """The result at the final sets; None if they fail SMO's stopping test. ``f`` are the decision
    values (no intercept) of the last round, Σ_F y α K + Σ_U C y K: the free part from the kernel
    rows at this α_F, the bounded part kept as the exact sum of the rows that entered and left U."""
    alpha = np.where(state == 2, C, 0.0)
    alpha[state == 1] = alpha_F
    grad_F = y - f  # F = −y∘∇f with ∇f = y∘f − e
    if not kkt_gap(alpha, grad_F, y, C) < tol:
        return None
    return SMOResult(
        alpha=alpha,
        intercept=intercept_rule(alpha, grad_F, y, C),
        objective=dual_objective(alpha, grad_F, y),
        n_iter=n_iter,
        converged=True,
        n_kernel_rows=store.filled,
    )
