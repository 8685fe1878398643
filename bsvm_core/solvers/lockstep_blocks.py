"""Each lockstep problem's own block of the rbf distance matrix, stacked: (problems × m × m) float32.

Lockstep SMO (:mod:`.lockstep_smo`) reads two rows of every problem a step, and the active-set
rounds (:mod:`.lockstep_active_set`) read the rows of each free set. From the matrix D over all
rows each such row is a gather through the problem's column indices (an index array of problems ×
rows built, then a ``take`` scattered over D): ~25 µs a row of 45 problems, a third of a step.
With every problem's block D[rows][:, rows] laid out once in a padded (P, m, m) array, the rows of
all problems are one ``take`` of whole rows (~3 µs).

Gathered from D, the blocks of 45 problems of ~200 rows cost ~3 ms (two takes each). A one-vs-one
problem holds two classes: with the rows grouped by class (:func:`grouped_problems`) and D computed in
that order, its block is four contiguous sub-blocks of D (0.5 ms for all 45), and its rows are in
class order (each class in the order of X), the order the solvers then use.

Pads (rows and columns past a problem's size) hold 1.0: a positive distance, so WSS3's b² / D
stays finite, and equal in every row, so a step's D_i − D_j leaves the pads' F alone.
"""

from __future__ import annotations

import numpy as np

from ..workspace import Empty

MAX_RUNS = 4
"""A problem whose rows fall in at most this many runs of the grouped order (one-vs-one: two
classes, one run each) copies its block as runs × runs slices; more runs: two takes."""


def grouped_problems(
    problems: list[tuple[np.ndarray, np.ndarray]], n: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]], list[np.ndarray]]:
    """(order, jobs, moves): an order of the n rows in which the rows of the same problems with
    the same targets (one-vs-one: a class) are contiguous, each group in the order of the rows
    (rows sorted stably by the first problem that holds them and their sign there; rows in no
    problem last); each problem's places in that order (ascending) with its ±1 targets there; and
    where each of its rows went: a result x in the job's order is ``x[move]`` in the problem's
    (row mask) order, ``move`` the inverse of the sort.

    ``problems`` are (row mask, ±1 targets of the masked rows)."""
    P = len(problems)
    key = np.full(n, 2 * P)  # rows in no problem: last
    jobs, moves = [], []
    for p in range(P - 1, -1, -1):  # the first problem holding a row writes its key last
        mask, y_pm = problems[p]
        key[mask] = 2 * p + (y_pm < 0)
    order = np.argsort(key, kind="stable")
    place = np.empty(n, dtype=np.intp)
    place[order] = np.arange(n)
    for mask, y_pm in problems:
        at = place[mask]
        sort = at.argsort(kind="stable")
        jobs.append((at.take(sort), y_pm.take(sort)))
        move = np.empty_like(sort)
        move[sort] = np.arange(sort.size)
        moves.append(move)
    return order, jobs, moves


def problem_blocks(D: np.ndarray, rows: list[np.ndarray], empty: Empty = np.empty) -> np.ndarray:
    """The (P, m, m) float32 blocks D[rows_p][:, rows_p], m the largest problem, pads 1.0: slices
    where a problem's rows (each sorted) fall in at most ``MAX_RUNS`` runs of D's rows, else two
    takes."""
    P = len(rows)
    sizes = [r.size for r in rows]
    m = max(sizes)
    B = empty((P, m, m), dtype=np.float32)
    # the runs of every problem at once: a run starts at a problem's first row or after a gap
    every = np.concatenate(rows)
    starts = np.cumsum([0, *sizes])
    new_run = np.ones(every.size, dtype=bool)
    np.not_equal(np.diff(every), 1, out=new_run[1:])
    new_run[starts[:-1]] = True
    run_at = new_run.nonzero()[0]
    run_lo = every.take(run_at).tolist()
    run_at = run_at.tolist()
    first_run = np.searchsorted(run_at, starts).tolist()
    for p, r in enumerate(rows):
        k = sizes[p]
        out = B[p]
        q0, q1 = first_run[p], first_run[p + 1]
        if q1 - q0 <= MAX_RUNS:
            s0 = starts[p]
            bounds = [a - s0 for a in run_at[q0:q1]] + [k]
            runs = [
                (a0, a1, t0, t0 + a1 - a0)
                for a0, a1, t0 in zip(bounds[:-1], bounds[1:], run_lo[q0:q1], strict=True)
            ]
            for a0, a1, s0_, s1_ in runs:
                for b0, b1, t0, t1 in runs:
                    out[a0:a1, b0:b1] = D[s0_:s1_, t0:t1]
        else:
            # mode "clip" (the rows are valid): "raise" buffers the output
            np.take(D.take(r, axis=0), r, axis=1, out=out[:k, :k], mode="clip")
        if k < m:
            out[:k, k:] = 1.0
            out[k:] = 1.0
    return B
