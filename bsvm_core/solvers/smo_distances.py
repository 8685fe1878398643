"""SMO with WSS3 on a whole rbf distance matrix D = max(1 − K, τ/2), in fewer numpy calls a step.

The same steps as :func:`.smo.smo_solve` on ``DenseKernelRows(D, distances=True)`` (finite C), for
small problems whose step is a dozen numpy calls of ~0.5 µs on a few hundred rows. Four changes
take four of those calls off each step:

* the sets are kept inside the gradient: U = F + p_up (−inf outside I_up) and L = F + p_low (+inf
  outside I_low); i = argmax U and b_t = m − L_t directly;
* U and L lie side by side in one array G = [U | L], which one ``daxpy`` with a row of the n × 2n
  W = [D | D] moves at once (two calls a step, not four);
* WSS3's j = argmax_{b_t > 0} b_t² / a_it is argmax_t b_t / √(a_it / 2) = argmax b_t R_it with
  R = D^(−1/2) (b_t ≤ 0 gives ≤ 0, and when no b_t is positive the problem has converged): one
  product instead of clip, square and divide; R's rows are made when a row first serves as i;
* m is passed to the subtraction as a 0-d array (a Python float costs numpy ~0.5 µs to convert).

Half of a step is Python, so the loop also keeps its bytecodes few: :func:`.smo.pair_update`
inline (tested against it through ``smo_solve``'s steps), bound methods as locals, and no writes to
U and L for a point free before and after its step (a daxpy over [D | D] moves its U_t and L_t
alike, so they stay equal), and daxpy reads its row at an offset into W's flat view (no view
made). Wine's pairs and moons: 4-10 % less solver CPU, the same bits. Single entries go through
memoryviews (U_i, L_j, W_ij, b_j, m, and argmax written into a 0-d index array: Python numbers
without ``ndarray.item``, ``__setitem__`` or ``int()``), y's signs are bytes (no floats made; a
product by y_t = ±1 is a sign), and the fixed cost of a solve is fewer calls: the start state in
one ``where``, α out by ``struct.pack_into`` (``np.array`` of a list costs ~40 ns a value), the
intercept's free points as U ≥ L. Wine's fit 34-75 µs less CPU, moons(400) 62-161 µs (issue 27),
the same bits. A Newton step's α_F is packed from the list into an array (callgrind: 0.7 %
fewer instructions on wine's pairs at C = 10, 0.4 % on moons(400)). Its α written back
(:func:`.face_newton.apply_newton_step`, shared with ``smo``) stays a Python loop:
``map(alpha.__setitem__, …)`` drained by a ``deque`` cost 2.5 % / 1.0 % more (Python 3.11: a loop's
list store is cheaper than a slot wrapper's call), the loop without the bound test plus ``min`` and
``max`` of α_F 1.0 % / 0.4 % more.

With ``rows`` a problem on some rows (a one-vs-one pair) runs on the [D | D] of all rows, the
others kept out of both sets: no block is copied (wine: 6 ``take`` of ~10 µs a fit), and rows of
D^(−1/2) made for one pair serve the next (``inverse``); a step over 178 rows instead of 107-130
costs a little more, the fit 0.91x of the blocks' (wine, C = 1 and 10, the same models).

argmax b R and argmax b²/(a/2) agree but for rounding, so a near tie may pick another j than
``smo_solve``; the stopping rule (m − M < tol) and the pair update are the same.

With ``newton`` (``kernel_dual`` sets it), a Newton step on the free face (:mod:`.face_newton`)
replaces an SMO step whenever ``NEWTON_STREAK`` SMO steps in a row moved only free points: fewer,
bigger steps (moons(400) at C = 10: 153 iterations instead of 587; 205 before steps blocked early
went on along the face, ``face_newton.CONTINUE_FROM``), the same stopping rule.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from struct import pack_into
from typing import Protocol

import numpy as np
from scipy.linalg.blas import daxpy

from ..workspace import Empty
from .face_newton import NEWTON_STREAK, apply_newton_step, face_newton_step, newton_wait
from .smo import SMOResult, default_max_iter, dual_objective, intercept_rule

WHOLE_INVERSE_MAX_ROWS = 200
"""Up to this many rows D^(−1/2) is made whole, in two passes, before the first step (a row made
alone costs ~1.5 µs of calls; wine's pairs at C = 10 use a row in three steps of four); larger
problems make a row when it first serves as i (moons(400) uses 85 rows at C = 1: the whole
matrix made its fits 1.14x slower at C = 1, 1.06x at C = 10). Not with ``newton``: wine's pairs
then take 28-43 iterations, and rows made as they serve saved 0.02-0.06 ms a pair of 0.3-0.5."""


_SIDES = np.array([[1.0], [-1.0]])
"""y times these is positive on I_up (row 0) and on I_low (row 1) at α = 0."""
_OUTSIDE = np.array([[-np.inf], [np.inf]])
"""U's and L's value outside their sets."""


class InverseRows(Protocol):
    """Rows of R = D^(−1/2) already made, by index: what the solver reads of its ``inverse``
    (a dict it adds rows to, or a whole R from the fill, whose ``get`` never misses)."""

    def get(self, i: int, /) -> np.ndarray | None: ...

    def __len__(self) -> int: ...


def inverse_sqrt(d: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """R = 1 / √d elementwise: WSS3's b² / d ordered as b / √d for b > 0."""
    r = np.sqrt(d, out=out)
    return np.reciprocal(r, out=r)


def smo_solve_distances(
    W: np.ndarray,
    y: np.ndarray,
    C: float,
    tol: float = 1e-3,
    max_iter: int | None = None,
    start: SMOResult | None = None,
    stop_if: tuple[int, Callable[[np.ndarray], bool]] | None = None,
    max_inverse_rows: int | None = None,
    empty: Empty = np.empty,
    newton: bool = False,
    rows: np.ndarray | None = None,
    inverse: dict[int, np.ndarray] | InverseRows | None = None,
) -> SMOResult:
    """Solve the C-SVC dual (finite C) of the rbf kernel by SMO with WSS3 over D = max(1 − K, τ/2)
    (Fan, Chen & Lin 2005; K_ii = 1, so a_it = 2 D_it), given as W = [D | D] (n × 2n, e.g.
    ``kernel_matrices.dense_kernel_matrix(..., doubled=True)``): :func:`.smo.smo_solve`'s
    algorithm, stop rule, ``start`` and ``stop_if``. ``max_inverse_rows`` bounds the rows of
    D^(−1/2) kept (None: all n); the others are made again each time they serve. ``empty``
    makes the whole D^(−1/2) of small problems (a ``workspace.workspace``'s, say). With
    ``newton``, Newton steps on the free face (:func:`.face_newton.face_newton_step`, after
    ``NEWTON_STREAK`` SMO steps among free points) join SMO's, each counted as one iteration; the
    stopping rule is SMO's. With ``rows`` (sorted indices, no ``start``), the problem holds only
    those rows of W and y gives their targets: the other rows stay out of I_up and I_low (α = 0,
    y = 0), so no block of W is copied, and the result is the problem's alone. Targets are ±1. ``inverse`` holds
    rows of D^(−1/2) of W made by earlier problems on the same W, and gains this one's."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    y_problem = y
    if rows is not None:
        y = np.zeros(W.shape[0])
        y[rows] = y_problem
    n = y.shape[0]
    D = W[:, :n]
    if max_iter is None:
        max_iter = default_max_iter(y_problem.shape[0])
    inf = np.inf
    n2 = 2 * n
    if start is None or start.grad is None:
        alpha = [0.0] * n
        # α = 0: F = −y∘∇f = y, I_up the positive points, I_low the negative ones (rows
        # outside the problem, y = 0, in neither); G = [U | L] in one where (rows U and L)
        G = np.where(np.multiply(y, _SIDES) > 0.0, y, _OUTSIDE).reshape(n2)
    else:
        if rows is not None:
            raise ValueError("smo_solve_distances resumes only problems of all rows")
        a0, F = start.alpha, start.grad
        alpha = a0.tolist()
        pos = y > 0
        G = np.empty(n2)
        G[:n] = np.where((pos & (a0 < C)) | (~pos & (a0 > 0.0)), F, -inf)  # F on I_up
        G[n:] = np.where((pos & (a0 > 0.0)) | (~pos & (a0 < C)), F, inf)  # F on I_low
    U, L = G[:n], G[n:]  # one daxpy a row of W = [D | D] moves both
    # y_t > 0 as 1 or 0 by index (bytes: no float objects made; ±1 products as signs below)
    positive = (y > 0.0).tobytes()
    keep_rows = n if max_inverse_rows is None else max_inverse_rows
    if inverse is None:
        inverse = {}
        if not newton and n <= WHOLE_INVERSE_MAX_ROWS and keep_rows >= n:
            R = inverse_sqrt(D, out=empty((n, n)))
            inverse = dict(enumerate(R))
    m = np.empty(())  # m(α) as a 0-d array
    score = np.empty(n)
    buf = np.empty(n)
    shift = 0.0  # F = U or L + shift: F += c K_t = F + c − c D_t keeps c aside
    n_iter = 0
    converged = False
    stop_at = stop_if[0] if stop_if is not None else -1
    streak = 0  # SMO steps in a row among free points
    newton_at = 0  # the earliest step of the next Newton step
    # bound methods and functions as locals: each saves an attribute or global lookup a step
    streak_at = NEWTON_STREAK if newton else max_iter + 1
    argmax_up, subtract, multiply, argmax_buf = U.argmax, np.subtract, np.multiply, buf.argmax
    # single entries through memoryviews: a read or write costs less than ndarray.item or
    # __setitem__ (the same doubles)
    # argmax into a 0-d index array read through its memoryview: a Python int, ~0.1 µs less than
    # int() of the returned numpy integer
    at = np.empty((), np.intp)
    U_, L_, W_, m_, score_, at_ = map(memoryview, (U, L, W, m, score, at))
    # rows of R by index: a dict of those made (``inverse`` itself when a dict, else a local one
    # over it: InverseRows.get makes a view each call)
    made = inverse if isinstance(inverse, dict) else {}
    get_made, get_inverse = made.get, inverse.get
    flat = W.reshape(-1)  # a view of a C-contiguous W (a copy otherwise)
    while n_iter < max_iter:
        if streak >= streak_at and n_iter >= newton_at:  # before the selection
            streak = 0
            free = (U >= L).nonzero()[0]  # in I_up and I_low: U_t = L_t = F_t − shift
            k = free.size
            step = None
            if k >= 2:
                listed = free.tolist()
                F_F = U[free]
                F_F += shift
                # packed into an array (~0.5 µs less than np.array of the tuple, the same
                # doubles); not np.frombuffer of packed bytes: unaligned, BLAS's ddot of it in
                # face_newton may sum in another order
                a_F = np.empty(k)
                pack_into(f"{k}d", a_F, 0, *itemgetter(*listed)(alpha))
                step = face_newton_step(D[free], free, y[free], a_F, F_F, C)
            if step is None:
                newton_at = n_iter + newton_wait(k, False)
            else:
                newton_at = n_iter + newton_wait(k, True)
                apply_newton_step(step, alpha, listed, (U, L), U, L, positive, C)
                n_iter += 1
                if n_iter == stop_at and stop_if is not None and stop_if[1](np.array(alpha)):
                    break
                continue
        argmax_up(None, at)
        i = at_[()]
        m_[()] = U_[i]
        R_i = get_made(i)
        if R_i is None:
            R_i = get_inverse(i)
            if R_i is None:
                R_i = np.sqrt(D[i])  # inverse_sqrt, inline
                np.reciprocal(R_i, R_i)
                if len(inverse) < keep_rows:
                    made[i] = R_i
            else:
                made[i] = R_i
        subtract(m, L, score)  # b_t = m − F_t over I_low, −inf outside
        multiply(score, R_i, buf)
        argmax_buf(None, at)
        j = at_[()]
        b_j = score_[j]
        # m − M ≥ b_j, so the full stopping test is needed only when b_j is below tol
        if b_j < tol and float(score.max()) < tol:
            converged = True
            break
        y_i, y_j = positive[i], positive[j]
        a_i_old, a_j_old = alpha[i], alpha[j]
        i_free = 0.0 < a_i_old < C
        j_free = 0.0 < a_j_old < C
        if i_free and j_free:
            streak += 1
        else:
            streak = 0
        # pair_update, inline (a call and a tuple fewer); a_ij = 2 D_ij
        if y_i != y_j:
            delta = (b_j if y_i else -b_j) / (2.0 * W_[i, j])  # y_i b_j
            diff = a_i_old - a_j_old
            a_i, a_j = a_i_old + delta, a_j_old + delta
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
        else:
            delta = (-b_j if y_i else b_j) / (2.0 * W_[i, j])  # −y_i b_j
            total = a_i_old + a_j_old
            a_i, a_j = a_i_old - delta, a_j_old + delta
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
        alpha[i] = a_i
        alpha[j] = a_j
        # F += c_t K_t (c_t = −y_t Δα_t) is G −= c_t W_t and shift += c_t; −c_t = y_t Δα_t exactly
        # (−1) x = −x exactly (−0 for x = 0 too)
        e_i = a_i - a_i_old if y_i else -(a_i - a_i_old)
        e_j = a_j - a_j_old if y_j else -(a_j - a_j_old)
        # positional (n, a, offx): f2py parses keywords slower, ~0.1 µs; the row as an offset
        # into W's flat view, not a view of it (~0.1 µs a call)
        daxpy(flat, G, n2, e_i, i * n2)
        daxpy(flat, G, n2, e_j, j * n2)
        shift -= e_i + e_j
        # i was in I_up and j in I_low, so U_i and L_j hold their new F. A point free before
        # and after stays in both sets, its U and L moved alike (one daxpy over [D | D]): no write
        if not (i_free and 0.0 < a_i < C):
            F_i = U_[i]
            if y_i:
                U_[i] = -inf if a_i >= C else F_i
                L_[i] = inf if a_i <= 0.0 else F_i
            else:
                U_[i] = -inf if a_i <= 0.0 else F_i
                L_[i] = inf if a_i >= C else F_i
        if not (j_free and 0.0 < a_j < C):
            F_j = L_[j]
            if y_j:
                U_[j] = -inf if a_j >= C else F_j
                L_[j] = inf if a_j <= 0.0 else F_j
            else:
                U_[j] = -inf if a_j <= 0.0 else F_j
                L_[j] = inf if a_j >= C else F_j
        n_iter += 1
        if n_iter == stop_at and stop_if is not None and stop_if[1](np.array(alpha)):
            break

    alpha_out = np.empty(n)
    pack_into(f"{n}d", alpha_out, 0, *alpha)  # a list of floats to an array: ~7 ns a value
    F = np.where(np.isfinite(U), U, L)  # every t of the problem is in I_up or I_low (0 < C)
    F += shift
    # libsvm's rho over the free points, in both sets (U_t = L_t): intercept_rule's sum, of the
    # same values in the same order; without free points, its midpoint rule
    free = U >= L
    n_free = int(np.count_nonzero(free))
    if n_free:
        intercept = -(-float(np.add.reduce(F[free])) / n_free)
    if rows is not None:
        alpha_out, F, y = alpha_out[rows], F[rows], y_problem
    if not n_free:
        intercept = intercept_rule(alpha_out, F, y, C)
    before = (start.n_iter, start.n_kernel_rows) if start is not None else (0, 0)
    return SMOResult(
        alpha=alpha_out,
        intercept=intercept,
        objective=dual_objective(alpha_out, F, y),
        n_iter=before[0] + n_iter,
        converged=converged,
        n_kernel_rows=before[1],
        grad=F,
    )
