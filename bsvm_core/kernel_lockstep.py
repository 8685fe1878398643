"""KernelSVM's one-vs-one rbf problems in lockstep: many problems' SMO in the same numpy calls
(``solvers.lockstep_smo``) over each problem's block of one kernel matrix of all rows
(``solvers.lockstep_blocks``), with the hand-over to active sets of ``kernel_dual``'s lone problems,
also taken by all problems at once (``solvers.lockstep_active_set``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .feature_rank import rank_at_least
from .kernel_dual import ACTIVE_SET_MAX_ROWS, ACTIVE_SET_MIN_FEATURES
from .kernel_matrices import rbf_distance_matrix
from .solvers.lockstep_active_set import lockstep_active_sets
from .solvers.lockstep_blocks import grouped_problems, problem_blocks
from .solvers.lockstep_smo import LockstepResult, lockstep_smo
from .solvers.smo import SMOResult, default_max_iter, dual_objective, intercept_rule
from .workspace import workspace

LOCKSTEP_MIN_PROBLEMS = 10
"""One-vs-one rbf fits with at least this many problems (5 classes) go through
``solvers.lockstep_smo``, all problems in the same numpy calls; fewer are solved one by one (wine's
and iris's 3 problems: 1.5x slower in lockstep, its calls then carry little work each)."""

LOCKSTEP_MAX_ROWS = 3000
"""Largest training set of a lockstep fit: its float32 kernel matrix of all rows (36 MB at 3,000)
must also fit in ``cache_mb``; larger sets are solved one problem at a time. The problems' float32
blocks (``solvers.lockstep_blocks``, ~2 n² values on balanced classes) go in as many lockstep calls
as ``cache_mb`` beside the matrix asks (one on the sets measured)."""

LOCKSTEP_ACTIVE_SET_MIN_ROWS = 150
"""Lockstep problems from this many rows (below ``ACTIVE_SET_MAX_ROWS``) probe, then may hand over
to the active sets; smaller ones finish in lockstep SMO. Lower than ``ACTIVE_SET_MIN_ROWS``: the
rounds of all problems at once cost less than one at a time. Fit time over 200 rows, interleaved
in one process (C = 0.1, 1, 10): pairs of ~200 rows, make_classification(600, 6 classes, flip_y
0.2) 0.82-0.69-0.42, (1000, 10 classes) 0.88-0.81-0.61, (2000, 20 classes) 0.87-0.98-0.84; pairs of
~100 rows (1000, 20 classes) 0.99-0.99-0.99 at 150, 1.12-1.27-1.06 at 100; digits, blobs 0.96-1.01."""

LOCKSTEP_PROBE_FRACTION = 4
"""Lockstep problems take n // this many steps (at least ``LOCKSTEP_PROBE_MIN_STEPS``) before the
active-set hand-over test: a lockstep step costs a few µs per problem, a third of a lone SMO step,
so the probe runs longer."""

LOCKSTEP_PROBE_MIN_STEPS = 80
"""Fewest probe steps of a lockstep problem that may hand over, and the hand-over asks only for
two free points (:func:`_lockstep_ready`), not :func:`_mostly_free`: pairs of ~200 rows whose
probe of n // 4 steps left more points at C than free (C = 1) went on by lockstep SMO to 170-260
steps; after 80-100 steps all of them finish by active sets in 2-4 rounds. Fit time over n // 4
with the test of one problem at a time, interleaved in one process (load 4-7), C = 1 / 10:
make_classification(1000, 16, 10 classes) 0.74-0.79 / 0.90-0.93 (a floor of 100: 0.74 / 0.79-0.84,
150: 0.83 / 0.88), (600, 20, 6 classes, flip_y=0.2) 0.62-0.67 / 0.93-0.96; digits' pairs (~360
rows: n // 4 is 87-91, above the floor) fit the same models, within the noise (0.94-0.98)."""


def _lockstep_ready(alpha: np.ndarray, C: float) -> bool:
    """Whether a lockstep probe's α should seed the active sets: at least two α_t free (see
    ``LOCKSTEP_PROBE_MIN_STEPS``; a failed hand-over costs its rounds, then SMO resumes)."""
    return int(np.count_nonzero((alpha > 0.0) & (alpha < C))) >= 2


def lockstep_applies(n: int, n_problems: int, kernel: Any, C: float, cache_mb: float) -> bool:
    """Whether one-vs-one problems over n rows go to :func:`solve_in_lockstep`: rbf, finite C, at
    least ``LOCKSTEP_MIN_PROBLEMS`` of them, at most ``LOCKSTEP_MAX_ROWS`` rows whose float32
    matrix fits in ``cache_mb``."""
    return (
        kernel == "rbf"
        and n_problems >= LOCKSTEP_MIN_PROBLEMS
        and n <= LOCKSTEP_MAX_ROWS
        and 4 * n * n <= cache_mb * 2**20
        and math.isfinite(C)
    )


def solve_in_lockstep(
    X: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray]],
    C: float,
    gamma: float,
    tol: float,
    cache_mb: float,
) -> list[SMOResult]:
    """Every (row mask, ±1 targets) problem's dual by lockstep SMO over each problem's block of one
    rbf matrix (``solvers.lockstep_blocks``: rows grouped by class, D computed in that order); as
    one at a time, a probe (n // ``LOCKSTEP_PROBE_FRACTION`` steps, at least
    ``LOCKSTEP_PROBE_MIN_STEPS``) may hand over to active sets. The blocks of as many problems
    at a time as fit in ``cache_mb`` beside D (all of them but on skewed classes; at least one).
    Rows grouped by class change the rounding of D's entries (float32, 1 ulp on 2 % of them on the
    10-class set) and the order of sums: objectives within 1e-7 of D in X's order there."""
    n = X.shape[0]
    order, grouped, moves = grouped_problems(problems, n)
    solved: list[SMOResult] = []
    with workspace() as empty:  # D and the blocks: buffers kept from the last fit
        D = rbf_distance_matrix(X[order], gamma, empty)
        m = max(rows.size for rows, _ in grouped)
        room = max(cache_mb * 2**20 - D.nbytes, 0.0)
        per_call = max(1, int(room // (4 * m * m)))
        for c0 in range(0, len(grouped), per_call):
            chunk = grouped[c0 : c0 + per_call]
            with workspace() as inner:
                B = problem_blocks(D, [rows for rows, _ in chunk], inner)
                budget = max(cache_mb - (D.nbytes + B.nbytes) / 2**20, 0.0)
                solved += _lockstep_fit(X, chunk, C, tol, budget, B)
    for move, res in zip(moves, solved, strict=True):
        res.alpha = res.alpha.take(move)  # to the problem's row order
    return solved


def _lockstep_fit(
    X: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray]],
    C: float,
    tol: float,
    budget: float,
    B: np.ndarray,
) -> list[SMOResult]:
    """:func:`solve_in_lockstep` over the problems' blocks B (``solvers.lockstep_blocks``), the
    active sets' rows within ``budget`` MB."""
    jobs = problems
    rows = [r for r, _ in jobs]
    probe_steps = [
        max(LOCKSTEP_PROBE_MIN_STEPS, r.size // LOCKSTEP_PROBE_FRACTION)
        if LOCKSTEP_ACTIVE_SET_MIN_ROWS <= r.size < ACTIVE_SET_MAX_ROWS
        else default_max_iter(r.size)
        for r in rows
    ]
    solved: list[LockstepResult] = lockstep_smo(B, jobs, C, tol=tol, steps=probe_steps)
    # the rank test once, on all rows (85 µs a problem): a pair of classes of lower rank only
    # makes its active sets give up, and the lockstep SMO finishes it
    full_rank = rank_at_least(X, ACTIVE_SET_MIN_FEATURES)
    ready = [
        p
        for p, sol in enumerate(solved)
        if full_rank
        and not sol.converged
        and sol.n_iter >= probe_steps[p]
        and _lockstep_ready(sol.alpha, C)
    ]
    by_active_set: dict[int, SMOResult] = {}
    if ready:
        with workspace() as empty:  # the active sets' scratch: buffers kept from the last fit
            done = lockstep_active_sets(
                B,
                [jobs[p] for p in ready],
                [solved[p].alpha for p in ready],
                C,
                tol,
                budget,
                empty,
                ready,
            )
        for p, res in zip(ready, done, strict=True):
            if res is not None:
                res.n_iter += solved[p].n_iter
                by_active_set[p] = res
    resume = [p for p, sol in enumerate(solved) if not sol.converged and p not in by_active_set]
    if resume:
        rest = lockstep_smo(
            B,
            [jobs[p] for p in resume],
            C,
            tol=tol,
            starts=[solved[p] for p in resume],
            blocks=resume,
        )
        for p, sol in zip(resume, rest, strict=True):
            solved[p] = sol
    return [
        by_active_set.get(p)
        or SMOResult(
            alpha=sol.alpha,
            intercept=intercept_rule(sol.alpha, sol.grad, y_pm, C),
            objective=dual_objective(sol.alpha, sol.grad, y_pm),
            n_iter=sol.n_iter,
            converged=sol.converged,
            n_kernel_rows=0,
        )
        for p, ((_, y_pm), sol) in enumerate(zip(problems, solved, strict=True))
    ]
