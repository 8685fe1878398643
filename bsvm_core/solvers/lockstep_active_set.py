"""The primal-dual active sets of :mod:`.active_set` on many one-vs-one rbf problems, round by round.

After lockstep SMO's probe (:mod:`.lockstep_smo`) the one-vs-one problems of a multiclass fit go on
with active-set rounds. One problem at a time, a round is some forty numpy calls on a few hundred
rows, and the calls cost more than their arithmetic (digits: 45 problems, 1 to 5 rounds each, 28 ms).
Here every problem still going takes its round at once: the set updates are operations on
(problems × rows) arrays, padded as in lockstep SMO, and only what has a size of its own stays a
loop over problems: the Newton step on the free set (:func:`.active_set.newton_step_kernel`) and the two
products with the problem's kept kernel rows.

Each problem takes the rounds of :func:`.active_set.active_set_solve` with the same rules and the
same tie-breaks (entering points and damped changes picked by the same ``argpartition`` calls) and
keeps Σ_U C y K(x_u, ·) as it does, updated as points join and leave U, so the two agree to
rounding (tests: the same rounds, α within 1e-9). A problem gives up (``None``: the caller resumes
its SMO) in the same cases: a repeated set, a Q_FF failing the pivot test, more than ``MAX_ROUNDS``
rounds, its rows beyond the budget, or a failed final check.

The kernel rows K = 1 − D of a round's free points and of the points that join or leave U are
read from each problem's float32 block of D (:mod:`.lockstep_blocks`, shared with lockstep SMO)
when they are used: one ``take`` of whole rows and the float64 difference into a reused buffer.
(A float64 store of every kept row, gathered from the matrix of all rows, cost 3.4 ms of the
10-class fit's 27 and 8 n² bytes.) ``cache_mb`` still bounds the rows a problem may keep, as one
at a time: a problem whose F ∪ U passes it gives up.
"""

from __future__ import annotations

import numpy as np

from ..workspace import Empty
from .active_set import MAX_ROUNDS, MIN_ENTERING, SEED_PER_CLASS, newton_step_kernel
from .lockstep_blocks import problem_blocks
from .smo import SMOResult, intercept_rule


class _RowStore:
    """Each problem's kept kernel rows (those of the points that entered F ∪ U), at most ``limit``
    a problem, read from the problem's block of D as K = 1 − D in float64 when they are used."""

    def __init__(
        self, B: np.ndarray, P: int, limit: int, empty: Empty, blocks: list[int] | None
    ) -> None:
        self.B, self.limit = B, limit
        self.blocks = list(range(P)) if blocks is None else list(blocks)
        m = B.shape[1]
        self.kept = np.zeros((P, m), dtype=bool)
        self.filled = np.zeros(P, dtype=np.int64)
        self.buffer = empty((m, m))

    def ensure(self, need: np.ndarray) -> np.ndarray:
        """Keep the rows of every (problem, row) in the mask ``need``; returns the problems whose
        rows would pass ``limit`` (none of theirs is kept)."""
        need = need & ~self.kept
        counts = need.sum(axis=1)
        over = self.filled + counts > self.limit
        if over.any():
            need[over] = False
            counts[over] = 0
        self.kept |= need
        self.filled += counts
        return over

    def rows(self, p: int, idx: np.ndarray) -> np.ndarray:
        """K(x_idx, problem p's rows) = 1 − D (the float32 difference, as kept rows were), in a
        buffer reused from call to call."""
        out = self.buffer[: idx.size]
        return np.subtract(1.0, self.B[self.blocks[p]].take(idx, axis=0), out=out)


def lockstep_active_sets(
    D: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray]],
    starts: list[np.ndarray],
    C: float,
    tol: float,
    cache_mb: float,
    empty: Empty = np.empty,
    blocks: list[int] | None = None,
) -> list[SMOResult | None]:
    """Every problem's dual by active-set rounds in lockstep, from its SMO probe; None where a
    problem gives up (the caller then resumes its SMO).

    Parameters
    ----------
    D : ndarray of shape (n, n), float32
        The rbf distance matrix max(1 − K, τ/2) over all rows (:mod:`.lockstep_smo`).
    problems : list of (rows, y)
        Each problem's row indices into D and its targets in {+1, −1} (both present).
    starts : list of ndarray
        Each problem's α after its probe: the first sets are its free points and those at C (plus
        ``SEED_PER_CLASS`` points of each class when fewer than two are free).
    C : float
        Box bound, finite and > 0.
    tol : float
        Stopping tolerance on m(α) − M(α), as SMO's.
    cache_mb : float
        Memory budget of the kept (float64) kernel rows of all problems.
    empty : callable
        Makes the scratch arrays (``np.empty``, or a ``workspace.workspace``'s).
    blocks : list of int or None
        With blocks for D, the block of each problem (None: the first ``len(problems)``).

    Returns
    -------
    list of SMOResult or None
        In the order of ``problems``; ``n_iter`` counts the rounds.
    """
    B = D if D.ndim == 3 else problem_blocks(D, [rows for rows, _ in problems], empty)
    P, m = len(problems), B.shape[1]
    sizes = [rows.size for rows, _ in problems]
    y = np.zeros((P, m))
    for p, (_, y_pm) in enumerate(problems):
        y[p, : y_pm.size] = y_pm
    limit = min(m, int(cache_mb * 2**20 // (8 * P * m)))
    results: list[SMOResult | None] = [None] * P
    if limit < 2 * SEED_PER_CLASS:
        return results
    state = np.zeros((P, m), dtype=np.int8)  # 0: α = 0 (and pads), 1: free, 2: α = C
    for p, alpha in enumerate(starts):
        _start_sets(state[p, : sizes[p]], alpha, y[p, : sizes[p]], C)
    store = _RowStore(B, P, limit, empty, blocks)
    theta = 0.25 * tol
    budget = np.array(sizes, dtype=np.int64)
    last_changes = budget + 1
    seen: list[set[bytes]] = [set() for _ in range(P)]
    act = np.arange(P)
    f, alpha_F = empty((P, m)), empty((P, m))
    f_U = np.zeros((P, m))  # Σ_U C y K(x_u, ·), updated as points join and leave U
    b = np.zeros(P)
    for rounds in range(1, MAX_ROUNDS + 1):
        acting = np.zeros(P, dtype=bool)  # np.isin's sort and Python spared
        acting[act] = True
        over = store.ensure(acting[:, None] & (state > 0))
        if rounds == 1:  # f_U of the first sets (problems whose rows fit)
            fits = (~over).nonzero()[0]
            _move_upper(store, fits, np.zeros_like(state[fits]), state[fits], y, C, f_U)
        st = state[act]
        in_U = st == 2
        free_of, free_at = np.nonzero(st == 1)
        bounds = np.searchsorted(free_of, np.arange(act.size + 1))
        upper_sums = (y[act] * in_U).sum(axis=1)
        alpha_F[act] = 0.0
        going = []
        for a, p in enumerate(act):
            key = st[a].tobytes()
            if over[p] or key in seen[p] or bounds[a] == bounds[a + 1]:
                continue
            seen[p].add(key)
            free = free_at[bounds[a] : bounds[a + 1]]
            if _newton_round(store, p, free, y[p], C, upper_sums[a], f_U[p], f[p], alpha_F[p], b):
                going.append(a)
        keep = np.asarray(going, dtype=np.int64)
        act, st = act[keep], st[keep]
        if act.size == 0:
            break
        aF = alpha_F[act]
        new, viol = _next_sets(st, y[act], f[act], aF, b[act], C, theta)
        _limit_changes(new, st, viol, budget, last_changes, act)
        settled = (new == st).all(axis=1)
        for p, res in zip(
            act[settled],
            _finish(st[settled], aF[settled], f[act[settled]], y[act[settled]], C, tol),
            strict=True,
        ):
            if res is not None:
                res.n_iter, res.n_kernel_rows = rounds, int(store.filled[p])
            results[p] = res
        act, st, new = act[~settled], st[~settled], new[~settled]
        _move_upper(store, act, st, new, y, C, f_U)
        state[act] = new
        if act.size == 0:
            break
    return results


def _start_sets(state: np.ndarray, alpha: np.ndarray, y: np.ndarray, C: float) -> None:
    """A problem's first sets from its probe's α, seeded as in :func:`.active_set_solve`."""
    state[alpha > 0.0] = 1
    state[alpha >= C] = 2
    if np.count_nonzero(state == 1) < 2:
        for members in ((y > 0).nonzero()[0], (y < 0).nonzero()[0]):
            picks = np.linspace(0, members.size - 1, min(SEED_PER_CLASS, members.size))
            state[members[picks.astype(np.int64)]] = 1


def _newton_round(
    store: _RowStore,
    p: int,
    free: np.ndarray,
    y: np.ndarray,
    C: float,
    upper_sum: float,
    f_U: np.ndarray,
    f: np.ndarray,
    alpha_F: np.ndarray,
    b: np.ndarray,
) -> bool:
    """Problem p's Newton step on its free set, given f_U = Σ_U C y K(x_u, ·) and Σ_U y, into its
    rows of ``f`` (decision values without the intercept), ``alpha_F`` (α on F, kept at 0
    elsewhere) and ``b``; False when it gives up."""
    y_F = y.take(free)
    S_F = store.rows(p, free)  # K(x_F, ·)
    K_FF = S_F.take(free, axis=1)
    step = newton_step_kernel(K_FF, y_F - f_U.take(free), -C * float(upper_sum))
    if step is None:
        return False
    z, b[p] = step  # z = y_F ∘ α_F
    np.dot(z, S_F, out=f)
    f += f_U
    alpha_F[free] = y_F * z
    return True


def _move_upper(
    store: _RowStore,
    act: np.ndarray,
    old: np.ndarray,
    new: np.ndarray,
    y: np.ndarray,
    C: float,
    f_U: np.ndarray,
) -> None:
    """f_U += C y K of the points that joined U less those that left it, for the problems
    ``act`` going from sets ``old`` to ``new`` (one row each)."""
    moved = (new == 2) != (old == 2)
    for a in moved.any(axis=1).nonzero()[0]:
        p = act[a]
        idx = moved[a].nonzero()[0]
        sign = np.where(new[a].take(idx) == 2, C, -C) * y[p].take(idx)
        f_U[p] += sign @ store.rows(p, idx)


def _next_sets(
    state: np.ndarray,
    y: np.ndarray,
    f: np.ndarray,
    alpha_F: np.ndarray,
    b: np.ndarray,
    C: float,
    theta: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Each problem's next sets and its violations, as :func:`.active_set_solve`'s round: free
    points outside the box go to their bound, bound points violating by more than θ become free
    (pads never move)."""
    violation = y * (f + b[:, None]) - 1.0
    at_zero, free = state == 0, state == 1
    np.negative(violation, out=violation, where=at_zero)
    np.copyto(violation, np.maximum(-alpha_F, alpha_F - C), where=free)
    violation[y == 0.0] = -np.inf
    new = state.copy()
    new[free & (alpha_F < 0.0)] = 0
    new[free & (alpha_F > C)] = 2
    new[(state == 2) & (violation > theta)] = 1
    entering = (violation > theta) & at_zero
    counts = entering.sum(axis=1)
    allowed = np.maximum(MIN_ENTERING, free.sum(axis=1))
    for a in (counts > allowed).nonzero()[0]:  # the most violating first
        e = entering[a].nonzero()[0]
        entering[a] = False
        entering[a, e[np.argpartition(-violation[a, e], allowed[a])[: allowed[a]]]] = True
    new[entering] = 1
    return new, violation


def _limit_changes(
    new: np.ndarray,
    state: np.ndarray,
    violation: np.ndarray,
    budget: np.ndarray,
    last_changes: np.ndarray,
    act: np.ndarray,
) -> None:
    """Damp as :func:`.active_set_solve`: a problem whose round changes no fewer points than its
    last halves its budget of changes, and keeps only its largest changes beyond it."""
    changed = new != state
    n_changed = changed.sum(axis=1)
    halve = n_changed >= last_changes[act]
    budget[act[halve]] = np.maximum(1, budget[act[halve]] // 2)
    last_changes[act] = n_changed
    for a in (n_changed > budget[act]).nonzero()[0]:
        keep_n = int(budget[act[a]])
        c = changed[a].nonzero()[0]
        keep = c[np.argpartition(-violation[a, c], keep_n)[:keep_n]]
        undo = np.setdiff1d(c, keep, assume_unique=True)
        new[a, undo] = state[a, undo]


def _finish(
    state: np.ndarray, alpha_F: np.ndarray, f: np.ndarray, y: np.ndarray, C: float, tol: float
) -> list[SMOResult | None]:
    """Settled problems' results (one row each, padded); None where SMO's stopping test fails
    (as :mod:`.active_set`): m(α) − M(α) < tol, libsvm's intercept and the dual objective."""
    valid = y != 0.0
    alpha = np.where(state == 2, C, alpha_F)
    grad = np.where(valid, y - f, 0.0)  # F = −y∘∇f with ∇f = y∘f − e
    pos, above, below = y > 0.0, alpha > 0.0, alpha < C
    up = valid & np.where(pos, below, above)
    low = valid & np.where(pos, above, below)
    gap = np.where(up, grad, -np.inf).max(axis=1) - np.where(low, grad, np.inf).min(axis=1)
    free = above & below
    n_free = free.sum(axis=1)
    rho = -np.where(free, grad, 0.0).sum(axis=1) / np.maximum(n_free, 1)
    objective = 0.5 * (alpha * (-y * grad - 1.0)).sum(axis=1)  # ½ αᵀ(∇f − e)
    out: list[SMOResult | None] = []
    for a in range(state.shape[0]):
        if not gap[a] < tol:
            out.append(None)
            continue
        k = int(np.count_nonzero(valid[a]))
        intercept = -float(rho[a])
        if n_free[a] == 0:  # no free α: the midpoint of the feasible interval
            intercept = intercept_rule(alpha[a, :k], grad[a, :k], y[a, :k], C)
        out.append(
            SMOResult(
                alpha=alpha[a, :k].copy(),
                intercept=intercept,
                objective=float(objective[a]),
                n_iter=0,
                converged=True,
                n_kernel_rows=0,
            )
        )
    return out
