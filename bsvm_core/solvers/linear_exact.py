"""Exact linear SVM: smoothed-hinge Newton continuation, then a primal-dual active-set finish.

Solves min_{w,b} ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)), b unpenalised, to round-off:

0. **Subsample warm start** (n ≥ WARM_ROWS, and 20 rows per feature in the subsample). The
   continuation on a random tenth of the rows with C·n/m (the loss keeps its scale), stopped at
   μ = 0.1, gives the starting point; the full continuation restarts at μ = 0.1 instead of 10,
   skipping the stages whose Newton systems involve most rows.
1. **Smoothing continuation.** Newton's method on the Huber-smoothed hinge of width μ (Chapelle 2007,
   §4), μ = 10, 1, 0.1, ..., each stage warm-started from the last. Every step is one pass over X plus
   a (d+1)×(d+1) solve, so the work is a few BLAS calls per stage (`linear_smooth`).
2. **Active-set finish.** Once few points lie in the quadratic zone of h_μ, α_i = C clip(z_i/μ, 0, 1)
   is a good dual guess; primal-dual active-set steps (Hintermüller, Ito & Kunisch 2003) solve the KKT
   system of the guessed partition exactly and re-partition until every KKT condition holds
   (`linear_active_set`). If that fails (degenerate data), smoothing continues; the returned point
   then carries the certificate P(w) − P* ≤ P(w) − F_μ(w) ≤ C n μ / 2.
3. **Reduced problems** (shrinking; Joachims 1999 did it for the dual). From μ ≤ 0.1, when at most a
   quarter of the rows lie in the band −3μ < z < 4μ around the margin, the others are held on their
   hinge piece: α_i = C for z_i > 0 (their loss is affine, a linear term in (w, b)) and α_i = 0
   below. The continuation goes on over the band alone (and may shrink it again); its exact optimum
   is checked against the KKT conditions on all rows, and any outside row that crossed the margin
   joins the band for another solve, so the result is the full problem's optimum to round-off.

When d > n the weights lie in the row space of X, so X = R'Q' (QR of X') reduces the problem to n
features and w = Q u. ``C = inf`` is the hard margin: a linear-programming feasibility check (HiGHS)
decides separability first (raising `NotSeparableError` otherwise), then the soft problem is solved
for growing C until no multiplier sits at its bound, which is the hard-margin solution
(for C ≥ max α_i of the hard-margin dual the two problems coincide).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.optimize import linprog

from ..exceptions import NotSeparableError
from .linear_active_set import active_set_polish, kkt_satisfied
from .linear_objective import LinearSolution, primal_from_residuals, primal_objective
from .linear_smooth import smoothed_newton, smoothed_objective

MU_START = 10.0
MU_MIN = 1e-12
FINISH_MU = 0.011
"""Largest smoothing width at which the working-set finish is tried."""
SHRINK_MU = 0.11
"""Largest smoothing width at which the rows far from the margin are held fixed (reduced problem)."""
BAND = 3.0
"""The reduced problem keeps the rows with −BAND·μ < z < (1 + BAND)·μ."""
SHRINK_RATIO = 0.25
"""Reduce only when the band holds at most this fraction of the rows..."""
SHRINK_MIN_ROWS = 2_000
"""...and the problem has at least this many rows (below, the Python overhead outweighs the gain)."""
WARM_ROWS = 20_000
"""From this many rows on, the continuation starts from the solution on a random subsample..."""
WARM_FRACTION = 0.1
WARM_ROWS_PER_FEATURE = 20
"""...and when the subsample has at least this many rows per feature."""
WARM_MU = 0.1
"""Smoothing width the continuation restarts at from a subsample's solution."""
KKT_TOL = 1e-9


@dataclass(frozen=True)
class _Problem:
    """min held − lin'(w, b) + ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)) over these rows.

    ``lin`` = C Σ y_i (x_i, 1) over rows held at α_i = C outside a reduced problem (None: none),
    and ``held`` = C × their number: their hinge C(1 − y_i(w'x_i + b)) summed, so the reduced
    objective is the full one wherever the held rows keep their side, and the stopping rules'
    relative tests are relative to the full objective.
    """

    X: np.ndarray
    y: np.ndarray
    C: float
    fit_intercept: bool
    tol: float
    lin: np.ndarray | None = None
    held: float = 0.0


@dataclass(frozen=True)
class ContinuationFit:
    """A continuation's result: (w, b), steps, flag, exact dual α (or None) and the last width μ."""

    w: np.ndarray
    b: float
    n_iter: int
    converged: bool
    alpha: np.ndarray | None
    mu: float


def fit_linear_exact(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    fit_intercept: bool = True,
    tol: float = 1e-4,
    max_iter: int = 1000,
) -> LinearSolution:
    """Exact soft- (or hard-, C = inf) margin linear SVM on ±1 labels; see the module docstring."""
    n, d = X.shape
    if d > n:
        Q, R = linalg.qr(X.T, mode="economic", check_finite=False)
        sol = fit_linear_exact(R.T, y, C, fit_intercept, tol, max_iter)
        return LinearSolution(Q @ sol.w, sol.b, sol.n_iter, sol.converged, sol.objective)
    if np.isinf(C):
        return _hard_margin(X, y, fit_intercept, tol, max_iter)
    return _soft_margin(X, y, C, fit_intercept, tol, max_iter)[0]


def smoothed_warm_start(
    X: np.ndarray, y: np.ndarray, C: float, fit_intercept: bool, tol: float, max_iter: int
) -> tuple[np.ndarray, float, int]:
    """(w, b, steps): the minimiser of F_μ at μ = WARM_MU, as the subsample warm start computes it."""
    problem = _Problem(X, y, C, fit_intercept, tol)
    w, b, mu, total = _start(problem, max_iter)
    fit = _continuation(problem, max(1, max_iter - total), w, b, mu, WARM_MU)
    return fit.w, fit.b, total + fit.n_iter


def solve_with_fixed_rows(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    lin: np.ndarray,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
    w: np.ndarray,
    b: float,
    mu: float,
    held: float = 0.0,
) -> ContinuationFit:
    """Continuation from (w, b, μ) on min held − lin'(w, b) + ½‖w‖² + C Σ hinge over these rows.

    The rows of a larger problem held at α = C enter through ``lin`` = C Σ y_i (x_i, 1) (length
    d + 1, or d without intercept) and ``held`` = C × their number: a reduced problem, as
    ``_reduced`` builds it in memory.
    """
    k = X.shape[1] + 1 if fit_intercept else X.shape[1]
    lin_k = np.asarray(lin[:k], dtype=np.float64)
    problem = _Problem(X, y, C, fit_intercept, tol, lin_k, float(held))
    return _continuation(problem, max_iter, w, b, mu)


def _soft_margin(
    X: np.ndarray, y: np.ndarray, C: float, fit_intercept: bool, tol: float, max_iter: int
) -> tuple[LinearSolution, np.ndarray | None]:
    """Warm start, smoothing continuation with reduction and finish; (solution, exact dual or None)."""
    problem = _Problem(X, y, C, fit_intercept, tol)
    w, b, mu, total = _start(problem, max_iter)
    fit = _continuation(problem, max(1, max_iter - total), w, b, mu)
    sol = LinearSolution(
        fit.w, fit.b, total + fit.n_iter, fit.converged, primal_objective(X, y, fit.w, fit.b, C)
    )
    return sol, fit.alpha


def _start(problem: _Problem, max_iter: int) -> tuple[np.ndarray, float, float, int]:
    """Starting (w, b, μ) and the steps spent: zero at MU_START, or a subsample's smoothed solution.

    The subsample (a random WARM_FRACTION of the rows, C·n/m so the loss keeps its scale, itself
    warm-started the same way) is solved only down to μ = WARM_MU: its sampling error in the
    margins is larger than what the finer stages would change.
    """
    n, d = problem.X.shape
    m = int(n * WARM_FRACTION)
    if n < WARM_ROWS or m < WARM_ROWS_PER_FEATURE * (d + 1):
        return np.zeros(d), 0.0, MU_START, 0
    rows = warm_start_rows(n)
    sub = _Problem(
        problem.X[rows], problem.y[rows], problem.C * n / m, problem.fit_intercept, problem.tol
    )
    w, b, mu, its = _start(sub, max_iter)
    fit = _continuation(sub, max(1, max_iter - its), w, b, mu, WARM_MU)
    return fit.w, fit.b, WARM_MU, its + fit.n_iter


def warm_start_rows(n: int) -> np.ndarray:
    """The sorted random WARM_FRACTION of the rows whose solution starts the continuation (seed 0)."""
    return np.sort(np.random.default_rng(0).choice(n, int(n * WARM_FRACTION), replace=False))


def _smoothing_gap(
    problem: _Problem, w: np.ndarray, b: float, z: np.ndarray, mu: float
) -> tuple[float, float]:
    """(P, P − F_μ) from the residuals: at F_μ's minimiser P − F_μ bounds P − P* (Chapelle 2007).

    P includes the held rows' affine hinge, held − lin'(w, b) (``_Problem``), which F_μ shares.
    """
    p_rows = primal_from_residuals(w, z, problem.C)
    gap = p_rows - smoothed_objective(w, z, problem.C, mu)
    p = p_rows + problem.held
    if problem.lin is not None:
        p -= float(problem.lin[: w.size] @ w)
        if problem.fit_intercept:
            p -= float(problem.lin[w.size]) * b
    return p, gap


def _continuation(
    problem: _Problem, max_iter: int, w: np.ndarray, b: float, mu: float, stop_mu: float = 0.0
) -> ContinuationFit:
    """Smoothing continuation from (w, b, μ) on the problem, reducing and finishing.

    With ``stop_mu`` > 0 it returns the smoothed solution after the stage at μ ≤ ``stop_mu``.
    """
    X, y, C, fit_intercept, lin = (
        problem.X,
        problem.y,
        problem.C,
        problem.fit_intercept,
        problem.lin,
    )
    n = X.shape[0]
    total = 0
    while True:
        cap = max(1, min(50, max_iter - total))
        w, b, k = smoothed_newton(X, y, C, mu, w, b, fit_intercept, cap, lin)
        total += k
        if mu <= stop_mu:
            return ContinuationFit(w, b, total, False, None, mu)
        z = 1.0 - y * (X @ w + b)
        if mu <= SHRINK_MU:
            band = (z > -BAND * mu) & (z < (1.0 + BAND) * mu)
            if n >= SHRINK_MIN_ROWS and X.shape[1] < np.count_nonzero(band) <= SHRINK_RATIO * n:
                fit = _reduced(problem, max_iter - total, w, b, mu, band, z)
                return ContinuationFit(
                    fit.w, fit.b, total + fit.n_iter, fit.converged, fit.alpha, fit.mu
                )
        if mu <= FINISH_MU:
            w2, b2, alpha, k2, exact = active_set_polish(
                X, y, C, z, mu, fit_intercept, kkt_tol=KKT_TOL, lin=lin
            )
            total += k2
            if exact:
                return ContinuationFit(w2, b2, total, True, alpha, mu)
        p, gap_bound = _smoothing_gap(problem, w, b, z, mu)
        if total >= max_iter or mu <= MU_MIN or gap_bound <= 1e-15 * max(p, 1.0):
            certified = gap_bound <= problem.tol * max(p, 1e-300)
            return ContinuationFit(w, b, total, bool(certified), None, mu)
        mu *= 0.1


def _reduced(
    problem: _Problem,
    max_iter: int,
    w: np.ndarray,
    b: float,
    mu: float,
    rows: np.ndarray,
    z: np.ndarray,
) -> ContinuationFit:
    """Continue on the rows near the margin, the others held at α = C (z > 0) or 0; grow until KKT.

    The rows outside hold their hinge piece, so the reduced objective equals the full one near
    the solution; a reduced optimum is the full optimum once every outside row keeps its side of
    the margin (checked on all rows), otherwise the rows that crossed join and it is solved again.
    """
    X, y, C, fit_intercept = problem.X, problem.y, problem.C, problem.fit_intercept
    d = X.shape[1]
    k = d + 1 if fit_intercept else d
    at_c = ~rows & (z > 0.0)
    total = 0
    while True:
        g = np.zeros(k) if problem.lin is None else problem.lin.copy()
        y_c = np.where(at_c, y, 0.0)
        g[:d] += C * (X.T @ y_c)
        if fit_intercept:
            g[d] += C * y_c.sum()
        held = problem.held + C * np.count_nonzero(at_c)
        sub = _Problem(X[rows], y[rows], C, fit_intercept, problem.tol, g, held)
        fit = _continuation(sub, max(1, max_iter - total), w, b, 0.1 * mu)
        del sub  # its row copy goes before the next round's (larger) one is made
        total += fit.n_iter
        w, b, mu = fit.w, fit.b, fit.mu
        z = 1.0 - y * (X @ w + b)
        if fit.alpha is not None:
            alpha = np.where(at_c, C, 0.0)
            alpha[rows] = fit.alpha
            if kkt_satisfied(X, y, C, w, b, alpha, KKT_TOL):
                return ContinuationFit(w, b, total, True, alpha, mu)
            crossed = (at_c & (z < 0.0)) | (~rows & ~at_c & (z > 0.0))
        else:
            crossed = (at_c & (z < mu)) | (~rows & ~at_c & (z > 0.0))
            if not crossed.any():
                p, gap_bound = _smoothing_gap(problem, w, b, z, mu)
                certified = fit.converged and gap_bound <= problem.tol * max(p, 1e-300)
                return ContinuationFit(w, b, total, bool(certified), None, mu)
        if not crossed.any() or total >= max_iter:
            return ContinuationFit(w, b, total, False, None, mu)
        rows = rows | crossed
        at_c &= ~rows


def is_separable(X: np.ndarray, y: np.ndarray, fit_intercept: bool) -> bool:
    """Whether some (w, b) has y_i(w'x_i + b) ≥ 1 for all i: an LP feasibility problem (HiGHS)."""
    A = -(y[:, None] * X)
    if fit_intercept:
        A = np.hstack([A, -y[:, None]])
    res = linprog(
        np.zeros(A.shape[1]), A_ub=A, b_ub=-np.ones(X.shape[0]), bounds=(None, None), method="highs"
    )
    if res.status == 2:
        return False
    if res.status != 0:
        raise NotSeparableError(f"The separability check failed: {res.message}")
    return True


def _hard_margin(
    X: np.ndarray, y: np.ndarray, fit_intercept: bool, tol: float, max_iter: int
) -> LinearSolution:
    """Hard margin: LP feasibility, then soft solutions for C = 1, 100, ... until none is at bound."""
    if not is_separable(X, y, fit_intercept):
        raise NotSeparableError(
            "C=inf asks for a hard margin, but no hyperplane separates the two classes "
            "(the linear-programming feasibility check is infeasible); use a finite C."
        )
    total = 0
    soft = None
    for C in 10.0 ** np.arange(0, 13, 2):
        soft, alpha = _soft_margin(X, y, float(C), fit_intercept, tol, max_iter)
        total += soft.n_iter
        if alpha is not None and alpha.max() < C * (1.0 - 1e-9):
            w, b = soft.w, soft.b
            return LinearSolution(w, b, total, True, float(0.5 * (w @ w)))
    assert soft is not None
    return LinearSolution(soft.w, soft.b, total, False, float(0.5 * (soft.w @ soft.w)))
