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
"""Signs of the pair's moves: α_i += y_i t, α_j −= y_j t (rows i, j of a (2, problems) array)."""


def pad_problems(problems: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, y) of shape (P, m): each problem's rows and ±1 targets, padded (row 0, y = 0)."""
    m = max(rows.size for rows, _ in problems)
    cols = np.zeros((len(problems), m), dtype=np.intp)
    y = np.zeros((len(problems), m))
    for p, (rows, y_pm) in enumerate(problems):
        cols[p, : rows.size] = rows
        y[p, : rows.size] = y_pm
    return cols, y


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
    valid = y != 0.0
    inf = np.inf
    alpha = np.zeros((P, m))
    F = y.copy()  # α = 0: F = y; pads stay 0 and out of both sets
    done_before = np.zeros(P, dtype=np.int64)
    if starts is not None:
        for p, start in enumerate(starts):
            alpha[p, : start.alpha.size] = start.alpha
            F[p, : start.grad.size] = start.grad
            done_before[p] = start.n_iter
    pos, inside = y > 0, alpha < C
    # 0 in I_up (y = +1 below C, y = −1 above 0), −inf outside; I_low the other way round
    up = np.where(valid & np.where(pos, inside, alpha > 0.0), 0.0, -inf)
    low = np.where(valid & np.where(pos, alpha > 0.0, inside), 0.0, inf)
    limit = [default_max_iter(k) for k in sizes] if steps is None else steps
    cap = np.asarray(limit, dtype=np.int64)
    ids = np.arange(P)
    first_row = (ids if blocks is None else np.asarray(blocks, dtype=np.intp)) * m
    results: list[LockstepResult | None] = [None] * P
    step = 0
    while ids.size:
        r = np.arange(ids.size)
        buf = F + up
        i = buf.argmax(axis=1)
        g_max = buf[r, i]
        D_i = rows_of.take(first_row + i, axis=0)
        score = g_max[:, None] - F  # b_t = m − F_t over I_low (−inf outside)
        score -= low
        np.maximum(score, 0.0, out=buf)
        buf *= buf
        buf /= D_i  # b_t² / (a_it / 2): WSS3's ratio, up to the factor 2
        j = buf.argmax(axis=1)
        gap_j = score[r, j]
        converged = gap_j < tol  # m − M ≥ b_j: the full test only where b_j is below tol
        if converged.any():
            converged &= score.max(axis=1) < tol
        stop = converged | (step >= cap)
        if stop.any():
            for k in stop.nonzero()[0]:
                size = sizes[ids[k]]
                results[ids[k]] = LockstepResult(
                    alpha=alpha[k, :size].copy(),
                    grad=F[k, :size].copy(),
                    n_iter=int(done_before[ids[k]]) + step,
                    converged=bool(converged[k]),
                )
            keep = ~stop
            ids, first_row, y, alpha, F = ids[keep], first_row[keep], y[keep], alpha[keep], F[keep]
            up, low, cap = up[keep], low[keep], cap[keep]
            continue
        D_j = rows_of.take(first_row + j, axis=0)
        ij = np.array((i, j))  # row 0: i, row 1: j
        y_ij, a_ij = y[r, ij], alpha[r, ij]
        s_ij = y_ij * _DIRECTION  # α_i moves by y_i t, α_j by −y_j t
        rises = s_ij > 0
        room = np.where(rises, C - a_ij, a_ij)
        # gap_j = m − F_j (j is in I_low: its penalty is 0)
        t = np.minimum(gap_j / (2.0 * D_i[r, j]), room.min(axis=0))
        # a step that reaches a bound puts the variable on it exactly
        a_ij = np.where(t >= room, np.where(rises, C, 0.0), a_ij + s_ij * t)
        alpha[r, ij] = a_ij
        change = np.subtract(D_i, D_j, dtype=np.float64)
        change *= t[:, None]
        F += change
        at_c, at_0, pos = a_ij >= C, a_ij <= 0.0, y_ij > 0
        up[r, ij] = np.where(np.where(pos, at_c, at_0), -inf, 0.0)
        low[r, ij] = np.where(np.where(pos, at_0, at_c), inf, 0.0)
        step += 1
    return [res for res in results if res is not None]  # every problem stopped once
