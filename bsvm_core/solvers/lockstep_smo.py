"""SMO on many binary rbf problems at once, in lockstep, over one shared kernel matrix.

One-vs-one on k classes trains k(k − 1)/2 small problems. One SMO step costs the same dozen numpy
calls whatever a problem's size, so for digits' 45 problems of ~360 rows the calls, not the
arithmetic, were the cost. Here every problem takes its step in the same calls: the state is a
(problems × rows) array, padded, and problems leave it as they converge.

Each problem is the C-SVC dual of :mod:`.smo` (libsvm's, with the working-set selection WSS3 of
Fan, Chen & Lin 2005, and its stopping rule m(α) − M(α) < tol) for the rbf kernel, whose diagonal is
1. With D = 1 − K (floored at τ/2, as libsvm floors the curvature), the curvature of a pair is
a_ij = 2 D_ij, and the step α_i += y_i t, α_j −= y_j t (which keeps yᵀα) changes the objective by
−(F_i − F_j) t + ½ a_ij t², with F = −y∘∇f. Its minimiser over the box is

    t = min((F_i − F_j) / a_ij, room_i, room_j),
    room_i = C − α_i (y_i = +1) or α_i (y_i = −1),   room_j = α_j (y_j = +1) or C − α_j (y_j = −1),

libsvm's clipped two-variable update, and F_k changes by −t (K_ki − K_kj) = t (D_ki − D_kj).
D is float32, as libsvm's kernel cache; F, α and the differences D_ki − D_kj are float64.

Each problem reads its own block of D (:mod:`.lockstep_blocks`): a row of every problem is one
``take`` of whole rows. A step is a few dozen numpy calls on (problems × rows) arrays; to spend
fewer of them (as :mod:`.smo_distances` does for one problem), the sets live inside the gradient,
U = F on I_up and −inf outside, L = F on I_low and +inf outside, side by side in one (2, P, m)
array that one addition moves; and the pair update works on β = y∘α, whose step is +t for i and
−t for j within [lo, hi] = [0, C] (y = +1) or [−C, 0] (y = −1), so no signs are looked up. The
same steps as with α and separate set penalties, to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lockstep_blocks import problem_blocks
from .smo import TAU, default_max_iter


@dataclass
class LockstepResult:
    """One problem's solution: α and F = −y∘∇f over its rows, its steps, and whether it converged."""

    alpha: np.ndarray
    grad: np.ndarray
    n_iter: int
    converged: bool


def distance_matrix(K: np.ndarray) -> np.ndarray:
    """D = max(1 − K, τ/2) in place over an rbf kernel matrix K (float32): a_ij = 2 D_ij."""
    np.subtract(K.dtype.type(1.0), K, out=K)
    return np.maximum(K, K.dtype.type(0.5 * TAU), out=K)


_DIRECTION = np.array([[1.0], [-1.0]])
"""Signs of the pair's moves in β = y∘α: β_i += t, β_j −= t (rows i, j of a (2, problems) array)."""

_RISES = _DIRECTION > 0


def lockstep_smo(
    D: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray]],
    C: float,
    tol: float = 1e-3,
    steps: list[int] | None = None,
    starts: list[LockstepResult] | None = None,
    blocks: list[int] | None = None,
) -> list[LockstepResult]:
    """Solve every problem (its rows of D and ±1 targets) by SMO with WSS3, all in the same steps.

    Parameters
    ----------
    D : ndarray of shape (n, n) or (P, m, m), float32
        :func:`distance_matrix` of the rbf kernel over all rows, or each problem's block of it
        (:func:`.lockstep_blocks.problem_blocks`: then a problem's rows index its block).
    problems : list of (rows, y)
        Each problem's row indices into D and its targets in {+1, −1} (both present).
    C : float
        Box bound, finite and > 0.
    tol : float
        Stopping tolerance on m(α) − M(α), per problem.
    steps : list of int or None
        Steps after which each problem stops (unconverged, to be resumed); None: libsvm's cap.
    starts : list of LockstepResult or None
        Stopped runs of the same problems to resume (their α, F and step counts).
    blocks : list of int or None
        With blocks for D, the block of each problem (None: the first ``len(problems)``).

    Returns
    -------
    list of LockstepResult
        In the order of ``problems``; ``n_iter`` counts the steps of ``starts`` too.
    """
    if D.ndim == 2:
        D = problem_blocks(D, [rows for rows, _ in problems])
    sizes = [rows.size for rows, _ in problems]
    P, m = len(problems), D.shape[1]
    rows_of = D.reshape(-1, m)  # row t of block q: rows_of[q m + t]
    y = np.zeros((P, m))
    for p, (_, y_pm) in enumerate(problems):
        y[p, : y_pm.size] = y_pm
    beta = np.zeros((P, m))  # β = y∘α in [lo, hi]
    F = y.copy()  # α = 0: F = y
    done_before = np.zeros(P, dtype=np.int64)
    if starts is not None:
        for p, start in enumerate(starts):
            k = start.alpha.size
            beta[p, :k] = start.alpha * y[p, :k]
            F[p, :k] = start.grad
            done_before[p] = start.n_iter
    hi = np.where(y > 0, C, 0.0)  # pads: hi = lo = 0, in neither set
    lo = np.where(y < 0, -C, 0.0)
    inf = np.inf
    G = np.empty((2, P, m))  # [U; L]: F on I_up (β < hi), −inf outside; F on I_low (β > lo), +inf
    np.copyto(G[0], np.where(beta < hi, F, -inf))
    np.copyto(G[1], np.where(beta > lo, F, inf))
    limit = [default_max_iter(k) for k in sizes] if steps is None else steps
    cap = np.asarray(limit, dtype=np.int64)
    ids = np.arange(P)
    first_row = (ids if blocks is None else np.asarray(blocks, dtype=np.intp)) * m
    results: list[LockstepResult | None] = [None] * P
    step = 0
    while ids.size:
        A = ids.size
        own = np.arange(A) * m  # each problem's first entry in the flattened (A, m) arrays
        buf, score, change = np.empty((A, m)), np.empty((A, m)), np.empty((A, m))
        to_L = np.array([[0], [A * m]])
        while True:  # steps until a problem stops
            U, L = G[0], G[1]
            i = U.argmax(axis=1)
            at_i = own + i  # i's entry in the flattened (A, m) arrays
            g_max = U.reshape(-1).take(at_i)
            D_i = rows_of.take(first_row + i, axis=0)
            np.subtract(g_max[:, None], L, out=score)  # b_t = m − F_t over I_low (−inf outside)
            np.maximum(score, 0.0, out=buf)
            buf *= buf
            buf /= D_i  # b_t² / (a_it / 2): WSS3's ratio, up to the factor 2
            j = buf.argmax(axis=1)
            at_j = own + j
            gap_j = score.reshape(-1).take(at_j)
            converged = gap_j < tol  # m − M ≥ b_j: the full test only where b_j is below tol
            if converged.any():
                converged &= score.max(axis=1) < tol
            stop = converged | (step >= cap)
            if stop.any():
                break
            D_j = rows_of.take(first_row + j, axis=0)
            ij = np.array((at_i, at_j))  # row 0: i, row 1: j, as flat indices
            b_ij, hi_ij, lo_ij = beta.take(ij), hi.take(ij), lo.take(ij)
            bound = np.where(_RISES, hi_ij, lo_ij)  # β_i rises by t, β_j falls by t
            room = bound - b_ij
            room *= _DIRECTION
            # gap_j = m − F_j (j is in I_low)
            t = np.minimum(gap_j / (2.0 * D_i.reshape(-1).take(at_j)), room.min(axis=0))
            # a step that reaches a bound puts the variable on it exactly
            new = np.where(t >= room, bound, b_ij + _DIRECTION * t)
            beta.put(ij, new)
            np.subtract(D_i, D_j, out=change, dtype=np.float64)
            change *= t[:, None]
            G += change  # F of both sets at once (±inf stay)
            flat = G.reshape(-1)
            F_ij = flat.take(ij + to_L)  # i was in I_up, j in I_low
            flat.put(ij, np.where(new >= hi_ij, -inf, F_ij))
            flat.put(ij + A * m, np.where(new <= lo_ij, inf, F_ij))
            step += 1
        F = np.where(G[0] > -inf, G[0], G[1])  # each valid t is in I_up or I_low (0 < C)
        for k in stop.nonzero()[0]:
            size = sizes[ids[k]]
            results[ids[k]] = LockstepResult(
                alpha=np.abs(beta[k, :size]),  # α = y∘β ≥ 0, without −0.0
                grad=F[k, :size],
                n_iter=int(done_before[ids[k]]) + step,
                converged=bool(converged[k]),
            )
        keep = ~stop
        ids, first_row, y, beta = ids[keep], first_row[keep], y[keep], beta[keep]
        hi, lo, cap = hi[keep], lo[keep], cap[keep]
        G = G.compress(keep, axis=1)  # contiguous (G[:, keep] need not be: puts go to G)
    return [res for res in results if res is not None]  # every problem stopped once
