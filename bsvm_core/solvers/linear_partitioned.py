"""Exact linear SVM on row partitions: every pass moves the models and sums, never all the rows.

The same optimum as ``linear_exact`` (min ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)), b unpenalised),
reached in a handful of passes over data held as ``RowPartitions``; all binary problems (the
classes of one-vs-rest, the pairs of one-vs-one, which keep only their two classes' rows) share
every pass:

0. **Sample pass** (``map_gather``): labels and their counts, max |x|, finiteness, and a random
   sample of about SAMPLE_ROWS rows. If that is every row, the problems are solved in memory by
   ``fit_linear_exact`` and the fit ends here. Otherwise each problem's sample solution with
   C·n/m, smoothed down to μ = WARM_MU (``linear_exact.smoothed_warm_start``), starts step 1.
1. **Newton passes** (``map_sum``) on the Huber-smoothed hinge F_μ (Chapelle 2007, §4): a pass
   evaluates each problem at x + t·s for a geometric grid of t (the values of F_μ along the last
   Newton direction s) and, at x + s·t for t ∈ T_SUMS, the gradient (d + 1) and Hessian
   (d + 1 × d + 1, X_q'X_q over the rows in the quadratic zone), plus those for μ/10 at t = 1.
   The best of those steps meeting Armijo's condition is taken (its sums already at hand);
   otherwise the grid's best point, whose sums the next pass computes. Once a full step moves
   at most SETTLED of the band's rows between pieces of h_μ (near F_μ's minimiser), the widest
   band −3δ < z < 4δ (z = 1 − y f, δ = μ/2^k) holding at most BAND_ROWS rows is gathered; if
   none does, μ ← μ/10 with the μ/10 sums of the same pass (or the band is gathered anyway when
   μ/10 would not shrink it: rows lying on the margin).
2. **Band pass** (``map_gather``): the band's rows and C Σ y_i (x_i, 1) over the rows beyond it
   (held at α_i = C; the rows below it are held at α_i = 0). The reduced problem is solved exactly
   in memory (``linear_exact.solve_with_fixed_rows``: continuation and active-set finish).
3. **Check passes** (``map_gather``): the KKT conditions of the held rows on all rows (α_i = C
   needs z_i ≥ 0, α_i = 0 needs z_i ≤ 0); rows that crossed come back, join the band, and the
   reduced problem is solved again (Joachims' 1999 shrinking, verified globally). The same pass
   sums the primal objective.

A fit therefore takes 1 + (Newton passes: none when the sample predicts a band that fits, else
usually 2 to 8) + 1 + (check passes, usually 1): 3 passes on 3M × 20 (the sample's band fits),
5 on 10M × 20 (two Newton passes at μ = WARM_MU). The sample and the band are capped in rows
(SAMPLE_ROWS, BAND_ROWS) and, for wide data, in values (ROW_VALUES, ``row_cap``).
``C = inf`` (hard margin) solves the hard-margin problem on the sample's support rows in memory
and adds the rows that violate its margin until none does (a cutting-plane method; rows that no
hyperplane separates raise ``NotSeparableError`` from the in-memory solve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..multiclass import REST, binary_problems
from ..partitions import RowPartitions
from .linear_exact import (
    BAND,
    MU_START,
    WARM_MU,
    fit_linear_exact,
    smoothed_warm_start,
    solve_with_fixed_rows,
)
from .linear_objective import LinearSolution
from .linear_partition_passes import (
    BAND_WIDTHS,
    T_GRID,
    T_SUMS,
    HeldRows,
    band_block,
    check_block,
    encode_labels,
    newton_block,
    problem_rows,
    sample_block,
)

SAMPLE_ROWS = 200_000
"""Most rows the sample pass brings back (all of them when the data set is no larger): its
solution starts the Newton passes, or, when its band is small enough, gives the band at once. A
sample of 20,000 left 3M × 20 rows two Newton steps from a band to gather."""
SAMPLE_FRACTION = 0.05
"""The sample's share of the rows (``sample_rows``): its in-memory start costs the driver time
in proportion (200,000 of 1M rows took 0.5 s on a loaded machine, the in-memory fit 0.7 s)."""
BAND_ROWS = 200_000
"""Most rows a problem's band may hold when it is gathered."""
ROW_VALUES = 4_000_000
"""Wide data: the sample and the band hold at most this many values (rows × features, 32 MB of
float64), but never fewer rows than WIDE_SAMPLE_ROWS and WIDE_BAND_ROWS."""
WIDE_SAMPLE_ROWS = 20_000
WIDE_BAND_ROWS = 100_000
MU_LAST = 1e-8
"""Smallest smoothing width: the band is gathered there whatever its size."""
STAGE_STEPS = 30
"""Newton passes allowed at one smoothing width."""
CHECK_ROUNDS = 30
"""Check passes (each may add rows to the band) before giving up."""
HARD_ROWS_PER_PASS = 10_000
"""Hard margin: most violating rows a check pass brings back (the worst of each partition)."""
HARD_TOL = 1e-9
HARD_SAMPLE_ROWS = 20_000
"""Hard margin: most sampled rows its in-memory start solves (the LP and cutting planes grow
faster than the rows: 9 s at 20,000 × 20, 40 s at 200,000 × 20 on a loaded machine)."""
"""Hard margin: a row violates the margin of a solution when z = 1 − y f exceeds this."""
ARMIJO = 1e-4
Sums = tuple[np.ndarray, np.ndarray, np.ndarray]
"""``newton_sums``: gradient sum (d + 1), Hessian sum (d + 1, d + 1), band sizes."""
STUCK = 0.5
"""The band is gathered, whatever its size, once μ/10 would keep more than this fraction of it."""
SETTLED = 0.1
"""A width's Newton steps stop once a full step moves at most this fraction of its band's rows
between pieces of h_μ: the exact minimiser of F_μ is not needed, only a band that holds the
optimum's support vectors (the check passes catch any that it misses). After a full Newton step
the next one is far smaller (10M × 20: 9 % of the band's rows, then 0.3 %): 0.05 spent a pass
on that second step."""


@dataclass
class _Problem:
    """One binary problem's state on the driver."""

    n: int
    C: float
    w: np.ndarray
    b: float
    mu: float
    dw: np.ndarray
    db: float = 0.0
    width: float = 0.0
    grad: np.ndarray | None = None
    steps: int = 0
    stage_steps: int = 0
    newton: bool = True
    solution: LinearSolution | None = None
    X_band: np.ndarray | None = None
    y_band: np.ndarray | None = None
    held: HeldRows | None = None
    lin: np.ndarray | None = None
    n_held: float = 0.0
    fit_alpha: bool = False
    fit_converged: bool = False
    fit_mu: float = 0.0


@dataclass(frozen=True)
class PartitionedFit:
    """Every problem's solution and the passes over the partitions the fit took."""

    solutions: list[LinearSolution]
    passes: int
    classes: np.ndarray
    n_features: int
    max_abs: float


def fit_linear_partitioned(
    parts: RowPartitions,
    scheme: str,
    C: float,
    fit_intercept: bool = True,
    tol: float = 1e-4,
    max_iter: int = 1000,
    seed: int = 0,
) -> PartitionedFit:
    """Exact linear SVMs of every binary problem over row partitions; see the module docstring.

    ``scheme`` ("ovr" or "ovo") decomposes more than two classes (``multiclass.binary_problems``);
    the first pass raises ValueError for non-finite X or fewer than two classes.
    """
    fraction = min(1.0, sample_rows(parts.n_rows, parts.n_features) / max(parts.n_rows, 1))
    blocks = parts.map_gather(sample_block, fraction, seed)
    if not all(finite for _, _, _, finite, _, _ in blocks):
        raise ValueError("Input X contains NaN or infinity.")
    labels = np.concatenate([lab for lab, *_ in blocks])
    classes = np.unique(labels)
    if classes.size < 2:
        raise ValueError(
            f"y contains 1 class ({classes[0]!r}); a classifier needs at least 2 classes."
        )
    counts = np.zeros(classes.size, dtype=np.int64)
    for lab, cnt, *_ in blocks:
        np.add.at(counts, np.searchsorted(classes, lab), cnt)
    max_abs = max(m for _, _, m, _, _, _ in blocks)
    Xs = np.concatenate([b[4] for b in blocks])
    ys_idx = encode_labels(np.concatenate([b[5] for b in blocks]), classes)
    problems = binary_problems(classes.size, scheme)
    result = dict(classes=classes, n_features=parts.n_features, max_abs=max_abs)
    if fraction >= 1.0:  # every row came back: the in-memory solver, nothing more to pass
        sols = [
            fit_linear_exact(*problem_rows(Xs, ys_idx, pr), C, fit_intercept, tol, max_iter)
            for pr in problems
        ]
        return PartitionedFit(sols, 1, **result)
    states = [
        _start(Xs, ys_idx, pr, _problem_size(counts, pr), C, fit_intercept, tol, max_iter)
        for pr in problems
    ]
    passes = 1 + _newton_passes(parts, classes, problems, states, fit_intercept, max_iter)
    passes += _finish(parts, classes, problems, states, fit_intercept, tol, max_iter)
    return PartitionedFit([s.solution for s in states], passes, **result)


def row_cap(rows: int, wide_rows: int, n_features: int) -> int:
    """min(rows, max(wide_rows, ROW_VALUES / d)): a row limit for d features (``ROW_VALUES``)."""
    return min(rows, max(wide_rows, ROW_VALUES // max(n_features, 1)))


def sample_rows(n_rows: int, n_features: int) -> int:
    """Rows the sample pass aims at: SAMPLE_FRACTION of the rows, within [WIDE_SAMPLE_ROWS, cap]."""
    cap = row_cap(SAMPLE_ROWS, WIDE_SAMPLE_ROWS, n_features)
    return min(cap, max(WIDE_SAMPLE_ROWS, int(SAMPLE_FRACTION * n_rows)))


def _band_rows(n_features: int) -> int:
    """Most rows a band of ``n_features`` features may hold when it is gathered."""
    return row_cap(BAND_ROWS, WIDE_BAND_ROWS, n_features)


def _problem_size(counts: np.ndarray, problem: tuple[int, int]) -> int:
    """Rows of one binary problem: all rows (one-vs-rest), or its two classes' rows."""
    pos, neg = problem
    return int(counts.sum()) if neg == REST else int(counts[pos] + counts[neg])


def _start(
    Xs: np.ndarray,
    ys_idx: np.ndarray,
    problem: tuple[int, int],
    n: int,
    C: float,
    fit_intercept: bool,
    tol: float,
    max_iter: int,
) -> _Problem:
    """A problem's starting state: the sample's smoothed solution at WARM_MU, else zero at MU_START.

    Hard margin (C = inf): the exact hard-margin solution on the sample, and no Newton phase.
    """
    X, y = problem_rows(Xs, ys_idx, problem)
    d = Xs.shape[1]
    state = _Problem(n, C, np.zeros(d), 0.0, MU_START, np.zeros(d))
    if math.isinf(C):
        step = max(1, -(-X.shape[0] // HARD_SAMPLE_ROWS))  # every step-th sampled row
        X, y = X[::step], y[::step]
        sol = fit_linear_exact(X, y, C, fit_intercept, tol, max_iter)  # raises if not separable
        state.w, state.b, state.steps, state.newton = sol.w, sol.b, sol.n_iter, False
        state.X_band, state.y_band, state.lin = X, y, np.zeros(d + 1)
        state.fit_alpha = state.fit_converged = sol.converged
        return state
    if np.unique(y).size == 2:
        m = X.shape[0]
        state.w, state.b, state.steps = smoothed_warm_start(
            X, y, C * n / m, fit_intercept, tol, max_iter
        )
        state.mu = state.width = WARM_MU
        z = 1.0 - y * (X @ state.w + state.b)
        band = np.count_nonzero((z > -BAND * WARM_MU) & (z < (1.0 + BAND) * WARM_MU))
        state.newton = band * n / m > _band_rows(d)  # else the sample's band is gathered at once
    return state


def _newton_passes(
    parts: RowPartitions,
    classes: np.ndarray,
    problems: list[tuple[int, int]],
    states: list[_Problem],
    fit_intercept: bool,
    max_iter: int,
) -> int:
    """Newton passes until every problem's band is small enough to gather; returns the passes."""
    passes = 0
    while True:
        active = [j for j, s in enumerate(states) if s.newton]
        if not active:
            return passes
        sent = [
            (j, states[j].w, states[j].b, states[j].dw, states[j].db, states[j].mu) for j in active
        ]
        results = parts.map_sum(newton_block, classes, problems, sent)
        passes += 1
        for j, res in zip(active, results, strict=True):
            _newton_update(states[j], *res, fit_intercept=fit_intercept, max_iter=max_iter)


def _newton_update(
    s: _Problem,
    h: np.ndarray,
    changed: int,
    sums_at: list[Sums],
    sums_next: Sums,
    fit_intercept: bool,
    max_iter: int,
) -> None:
    """Take the step (full, or the grid's best), then the next direction, width or phase."""
    moving = s.grad is not None and bool(np.any(s.dw) or s.db)
    s.steps += 1
    s.stage_steps += 1
    sums = sums_at[0]
    if moving:
        assert s.grad is not None
        F = np.array([0.5 * float((s.w + t * s.dw) @ (s.w + t * s.dw)) for t in T_GRID]) + s.C * h
        slope = float(s.grad @ np.append(s.dw, s.db)[: s.grad.size])
        armijo = [i for i, t in enumerate(T_SUMS) if F[i] <= F[-1] + ARMIJO * t * slope]
        if armijo:  # the best step with its sums at hand
            i = min(armijo, key=lambda i: F[i])
            s.w, s.b = s.w + T_SUMS[i] * s.dw, s.b + T_SUMS[i] * s.db
            sums = sums_at[i]
            if i == 0 and changed <= SETTLED * sums[2][0]:  # (nearly) no row changed piece
                _stage_done(s, sums, sums_next, fit_intercept, max_iter)
                return
        else:  # the grid's best step; its gradient comes with the next pass
            t = float(T_GRID[int(np.argmin(F))])
            s.w, s.b = s.w + t * s.dw, s.b + t * s.db
            s.dw, s.db, s.grad = np.zeros_like(s.w), 0.0, np.zeros(0)
            return
    if s.stage_steps > STAGE_STEPS or s.steps >= max_iter:
        _stage_done(s, sums, sums_next, fit_intercept, max_iter)
        return
    _direction(s, sums, fit_intercept)


def _stage_done(
    s: _Problem,
    sums: Sums,
    sums_next: Sums,
    fit_intercept: bool,
    max_iter: int,
) -> None:
    """After F_μ's minimiser: gather the widest band that is small enough, else go on at μ/10."""
    fits = np.flatnonzero(sums[2] <= _band_rows(s.w.size))
    stuck = sums_next[2][0] > STUCK * sums[2][0]  # rows sit on the margin: narrower won't help
    if fits.size or stuck or s.mu <= MU_LAST or s.steps >= max_iter:
        s.width = s.mu * float(BAND_WIDTHS[fits[0] if fits.size else -1])
        s.newton = False
        return
    s.mu *= 0.1
    s.stage_steps = 0
    _direction(s, sums_next, fit_intercept)


def _direction(s: _Problem, sums: Sums, fit_intercept: bool) -> None:
    """Newton direction of F_μ at (w, b) from the summed gradient and Hessian (Chapelle 2007)."""
    g_sum, H_sum, _ = sums
    d = s.w.size
    k = d + 1 if fit_intercept else d
    grad = -s.C * g_sum[:k]
    grad[:d] += s.w
    H = (s.C / s.mu) * H_sum[:k, :k]
    H[:d, :d].flat[:: d + 1] += 1.0
    if fit_intercept:
        H[d, d] += 1e-10 * (1.0 + np.trace(H[:d, :d]) / d)
    if np.linalg.norm(grad) <= 1e-12 * max(1.0, s.C * s.n):
        step = np.zeros(k)
    else:
        try:
            step = -linalg.cho_solve(
                linalg.cho_factor(H, check_finite=False), grad, check_finite=False
            )
        except linalg.LinAlgError:
            step = -linalg.lstsq(H, grad, check_finite=False)[0]
    s.grad = grad
    s.dw = step[:d]
    s.db = float(step[d]) if fit_intercept else 0.0
    if not (np.any(s.dw) or s.db):
        s.newton = False  # at the minimiser already


def _finish(
    parts: RowPartitions,
    classes: np.ndarray,
    problems: list[tuple[int, int]],
    states: list[_Problem],
    fit_intercept: bool,
    tol: float,
    max_iter: int,
) -> int:
    """Band pass, exact reduced solves in memory, check passes until no held row crosses."""
    hard = math.isinf(states[0].C)
    for s in states:
        s.held = HeldRows(s.w.copy(), s.b, s.width, hard=hard)
    passes = 0
    if not hard:  # the hard margin's band is the sample, already here and solved
        gathered = parts.map_gather(
            band_block, classes, problems, [(j, s.held) for j, s in enumerate(states)]
        )
        passes = 1
        for j, s in enumerate(states):
            s.X_band = np.concatenate([g[j][0] for g in gathered])
            s.y_band = np.concatenate([g[j][1] for g in gathered])
            s.lin, s.n_held = _split_held(np.sum([g[j][2] for g in gathered], axis=0))
            _solve_band(s, fit_intercept, tol, max_iter)
    cap = max(1, HARD_ROWS_PER_PASS // parts.n_partitions)
    pending = list(range(len(states)))
    for _ in range(CHECK_ROUNDS):
        sent = [
            (j, states[j].held, states[j].w, states[j].b, _lo(states[j]), _cap(states[j], cap))
            for j in pending
        ]
        checked = parts.map_gather(check_block, classes, problems, sent)
        passes += 1
        still = []
        for i, j in enumerate(pending):
            s = states[j]
            X_new = np.concatenate([c[i][0] for c in checked])
            loss = float(np.sum([c[i][3] for c in checked]))
            if X_new.shape[0] == 0:
                objective = 0.5 * float(s.w @ s.w) + (0.0 if math.isinf(s.C) else s.C * loss)
                converged = s.fit_alpha or s.fit_converged
                s.solution = LinearSolution(s.w, s.b, s.steps, bool(converged), objective)
                continue
            assert s.held is not None and s.X_band is not None and s.y_band is not None
            s.held.rounds.append((s.w.copy(), s.b, *_lo(s)))
            s.X_band = np.vstack([s.X_band, X_new])
            s.y_band = np.concatenate([s.y_band, np.concatenate([c[i][1] for c in checked])])
            s.lin, s.n_held = _split_held(np.sum([c[i][2] for c in checked], axis=0))
            _solve_band(s, fit_intercept, tol, max_iter)
            still.append(j)
        pending = still
        if not pending:
            return passes
    for j in pending:  # out of rounds: the last reduced solution, flagged
        s = states[j]
        s.solution = LinearSolution(s.w, s.b, s.steps, False, math.nan)
    return passes


def _lo(s: _Problem) -> tuple[float, float]:
    """(lo, hi): held rows need z ≥ lo (α = C; lo = 0, or μ after an inexact solve), z ≤ hi (α = 0)."""
    if math.isinf(s.C):
        return -np.inf, HARD_TOL
    return (0.0 if s.fit_alpha else s.fit_mu), 0.0


def _cap(s: _Problem, cap: int) -> int:
    """Rows a check may bring back per partition: all for the soft margin, the worst for the hard."""
    return cap if math.isinf(s.C) else np.iinfo(np.int64).max


def _split_held(total: np.ndarray) -> tuple[np.ndarray, float]:
    """(Σ y_i (x_i, 1), number of rows) from the summed ``held_sum`` of every partition."""
    return total[:-1], float(total[-1])


def band_start_mu(s: _Problem) -> float:
    """Smoothing width a band solve starts at: a tenth of the band's gathering width.

    Not a tenth of the last solve's final μ: Newton at μ ~ 1e-6 on a whole band of tens of
    thousands of rows takes its full step budget (54 of 60 s of a 1M-row fit). After a solve that
    found no exact dual, rows that crossed join from points far off its answer's margin, and
    Newton at a small μ from there does not reach F_μ's minimiser: such a round restarts the
    continuation at WARM_MU.
    """
    if s.fit_mu == 0.0 or s.fit_alpha:
        return 0.1 * s.mu
    return WARM_MU


def _solve_band(s: _Problem, fit_intercept: bool, tol: float, max_iter: int) -> None:
    """The reduced problem on the band, exactly, in memory (held rows through ``lin``).

    Every solve, the first and those after a check pass added rows, starts its continuation at
    μ/10 of the width the band was gathered at (from the last solution's (w, b)): the
    continuation then shrinks the band again to the rows near the margin within a stage or two.
    Starting a later solve at the last solve's final μ (1e-6 and below) instead ran Newton steps
    on the whole band at that width, each step moving few rows between pieces of h_μ: 50 steps a
    stage, ~54 s of a 60 s fit of 1M × 20 rows on a band of 47,619 rows.
    """
    assert s.X_band is not None and s.y_band is not None and s.lin is not None
    if math.isinf(s.C):
        sol = fit_linear_exact(s.X_band, s.y_band, s.C, fit_intercept, tol, max_iter)
        s.w, s.b, s.steps = sol.w, sol.b, s.steps + sol.n_iter
        s.fit_alpha, s.fit_converged = sol.converged, sol.converged
        return
    fit = solve_with_fixed_rows(
        s.X_band,
        s.y_band,
        s.C,
        s.C * s.lin,
        fit_intercept,
        tol,
        max(1, max_iter - s.steps),
        s.w,
        s.b,
        band_start_mu(s),
        s.C * s.n_held,
    )
    s.w, s.b, s.steps = fit.w, fit.b, s.steps + fit.n_iter
    s.fit_alpha, s.fit_converged, s.fit_mu = fit.alpha is not None, fit.converged, fit.mu
