"""KernelSVM's dual problems: which solver takes a problem (many one-vs-one rbf problems at once:
``kernel_lockstep``).

A binary problem goes to batched working sets (``solvers.batched_smo``) from ``BATCHED_MIN_ROWS``
rows, else to an SMO probe that may hand over to primal-dual active sets (``solvers.active_set``),
else to SMO alone (``solvers.smo``); up to ``DENSE_MAX_ROWS`` rows on a whole kernel matrix
(``kernel_matrices``), beyond on rows cached as they are needed. rbf problems with finite C up to
``DOUBLED_MAX_ROWS`` rows run their SMO on [D | D] (``solvers.smo_distances``), up to
``DOUBLED_PROBE_MAX_ROWS`` rows the active sets' probe too; on either, with a
whole rbf matrix and finite C, Newton steps on the free face (``solvers.face_newton``) join
SMO's, as they do in ``solvers.smo`` on a whole matrix or on cached rbf rows
(``solvers.cached_newton``). One-vs-rest fits within ``DENSE_MAX_ROWS``, and one-vs-one fits
not in lockstep within ``SHARED_SUBSET_MAX_ROWS``, solve their problems one by one on one kernel
matrix of all rows: a one-vs-one problem that SMO solves alone runs on the [D | D] of all rows with
the other classes' rows out of its sets, one that may hand over to active sets on its rows' block.
Large scratch arrays come from ``workspace``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .feature_rank import rank_at_least
from .kernel_matrices import (
    dense_kernel_matrix,
    float32_blocks,
    matrix_block,
)
from .kernels import (
    kernel_block_function,
    kernel_diagonal,
    kernel_row_function,
)
from .solvers.active_set import active_set_solve
from .solvers.batched_smo import batched_smo_solve
from .solvers.kernel_cache import DenseKernelRows, KernelRowCache
from .solvers.smo import SMOResult, smo_solve
from .solvers.smo_distances import InverseRows, smo_solve_distances
from .workspace import Empty, workspace

ACTIVE_SET_MAX_ROWS = 1500
"""Binary problems with fewer rows (at least ``ACTIVE_SET_MIN_ROWS``, finite C, a positive
semi-definite kernel, no max_iter) start with a short SMO probe and may go on with the primal-dual
active-set solver (``solvers.active_set``). Measured on make_classification(n, 20): 1.2-1.7x faster
than SMO below 1000 rows, even at 1500, slower from 2000 (the Cholesky of a large free set)."""

ACTIVE_SET_MIN_ROWS = 250
"""Smaller problems stay with SMO: it finishes them in about 1 ms, a few active-set rounds' fixed
cost (measured on wine pairs, 130 rows: 1.1-1.2x slower with the active sets). Was 200; with
face Newton steps on [D | D] (``DOUBLED_PROBE_MAX_ROWS``) SMO alone won from 200 to 249 rows too.
KernelSVM / SVC fit CPU, 250 over 200, median of 9 fits in shuffled order in one process (load
2-5 on 2 cores; a second copy of the 200 rule 1.02-1.04), make_classification with 2-4 classes,
problems of 200-249 rows, d = 8 / 13 / 20 / 30, flip_y 0 / 0.2, C = 0.1 / 1 / 10 / 100: 160 sets
x C, medians 0.96 / 0.96 / 0.90 / 0.93 by C, 3 classes of 356 rows at C = 10 1.36x SVC → 1.09x;
the active sets keep their lead only on noisy sets at C ≥ 10 (d = 13, flip_y 0.2: 1.08-1.18x
here, e.g. 3 classes of 356 rows at C = 100 0.96x SVC → 1.09x)."""

ACTIVE_SET_MIN_FEATURES = 8
"""Problems whose centred features span fewer dimensions (:func:`rank_at_least`) stay with SMO: the
rbf Gram matrix of a low-dimensional sample is numerically low-rank, so Q_FF of the free set fails
the pivot test or the rounds cycle (measured on iris, moons, make_classification with 3 and 5
features, and with 10 features of rank 2: every attempt gave up, costing 5-60 % more than SMO)."""

PROBE_FRACTION = 12
"""SMO runs n // PROBE_FRACTION steps first. If it has not converged and most of the points it moved
are free (:func:`_hand_over`), its sets seed the active sets (1-5 rounds instead of 7-13), and SMO
resumes from it, with its row cache, when they give up; otherwise SMO goes on in the same run.
Probes with more points at C than free (small C, where SMO is quick) gave 1.2-1.7x slower fits with
the rounds. Fit time over SMO alone, breast cancer / digits / make_classification(800, 20,
flip_y=0.2) at C = 1, 10, 100: n // 6 1.01-0.97-1.00, 0.87-0.88-0.69, 0.55-0.87-0.56; n // 12
1.00-0.92-1.02, 0.76-0.78-0.67, 0.46-0.79-0.53; n // 24 loses digits at C = 1 (1.00)."""

DENSE_MAX_ROWS = 3000
"""Binary problems up to this many rows (whose float64 matrix fits in ``cache_mb``) compute the
whole kernel matrix first, upper triangle by row-block products (:func:`rbf_symmetric_fill`): a
row alone costs 13 µs (six numpy calls on breast cancer's 569 rows), 2 µs in the products, and
SMO reads rows without a cache's bookkeeping. Fit time over row by row, C = 1, 10, 100 (with the
workspace, same session): breast cancer 0.69-0.75, wine 0.74-0.77, moons(400) 0.67-0.83,
make_classification(300/800/1400, 20, flip_y=0.2) 0.60-1.00; at 2,000 and 3,000 rows 0.64-0.92;
at 5,000 0.76-1.26 (the 200 MB matrix costs more than easy problems' rows), so not there."""

SHARED_SUBSET_MAX_ROWS = 300
"""Largest training set whose one-vs-one problems (fewer than
``kernel_lockstep.LOCKSTEP_MIN_PROBLEMS``) take their blocks of one kernel matrix of all rows
instead of filling their own: a fill's fixed cost
(~110 µs) dominates small pairs, the gathers and the larger matrix dominate large ones. Fit time
over problem by problem, C = 1, interleaved in one process (load 6-7.5): wine 0.94-0.96, iris
0.91, make_classification(n, 20, 4 classes) at 250 rows 0.95, 350 0.99, 450 1.04, 500 1.05, 1,000
1.17, 2,000 1.96. One-vs-rest problems hold every row, take the matrix itself and always gain:
0.85-0.87 on wine, 0.89 / 0.82 / 0.77 at 500 / 1,000 / 2,000 rows."""

DOUBLED_MAX_ROWS = 500
"""rbf problems up to this many rows on a dense matrix that SMO solves alone (finite C, no
active-set probe: :func:`active_sets_apply` false, the n × 2n float64 [D | D] within
``cache_mb``) take ``solvers.smo_distances``: a step of fewer numpy calls (~1.3 µs saved), whose
gradient update moves both set-masked gradients by one ``daxpy`` over a row of [D | D]. The copy
of D into the right half and the rows of D^(−1/2) are fixed costs, repaid only after ~n² / 2,000
steps: with 1,500 rows and the active sets' probe as well, breast cancer (569 rows) took 1.10x /
1.36x the time at C = 1 / 10, make_classification(800 / 1,400, 20) 1.16-1.26x; moons(400) at
C = 1 (173 steps) 1.02-1.11x, at C = 10 (587 steps) 0.87-0.92x; wine's pairs 0.86-0.97x. With
face Newton steps in ``smo.smo_solve`` too (the same iterations either way), fit time on [D | D]
over the dense matrix, moons at C = 1 / 10 / 100: 300 rows 0.76 / 0.83 / 0.90, 500 rows 0.89 /
0.83 / 0.89, 700 rows 1.21 / 1.02 / 1.02, 1,000 rows 1.27 / 1.13 / 1.03: 500 kept."""

FILLED_INVERSE_MAX_ROWS = DOUBLED_MAX_ROWS
"""Problems on the shared [D | D] of up to this many rows (:func:`solve_on_shared_matrix`) take
all of R = D^(−1/2) from the fill (``kernel_matrices.rbf_distance_matrix``'s ``inverse``: float32
sqrt and reciprocal of the block in cache, widened; ~30 µs on wine) read by row views
(:class:`_Rows`), instead of rows made as SMO first needs them (two ufunc calls and a dict insert
each: wine's pairs make 55 of 178). Fit time over rows as needed, C = 1 / 10, interleaved in one
process, the same α to the bit: wine 0.96-0.97 / 0.97, iris 0.96 / 0.97, make_classification(300,
4, 3 classes) 0.95 / 0.97, (200, 5, 4 classes) 0.94 / 0.95, one-vs-rest on wine 0.96 / 0.85, on
(450, 4, 3 classes) 0.95 / 0.98. Not for a binary problem alone (``solve_dual``): moons(400) uses
80-82 of R's 400 rows, and the fill's extra ~120 µs in a fit ate its solver's saving (1.01-1.04).
Measured again after the fill's float32 divide (issue 27): fit CPU with R from the fill over rows
as needed, interleaved in one process, median of 21 paired ratios, two runs at load 4-7 (noise:
breast cancer, which does not take this path, 0.96-1.00), C = 1 / 10 / 100: moons(200) 0.93-0.97 /
1.01-1.02 / 0.96-0.97, (250) 1.00 / 1.05 / 1.01, (300) 1.00-1.05 / 1.02-1.03 / 0.97-1.01, (350)
1.01 / 1.03 / 1.03, (400) 1.05-1.08 / 1.05 / 1.04, (500) 1.04-1.08 / 1.05 / 1.04;
make_classification(300, 5) 0.96-1.00 / 0.98-1.00 / 1.00-1.08, (300, 7) 0.92-1.01 / 0.96-1.01 /
1.00-1.02, (450, 5 or 7) 1.00-1.05 / 1.04-1.07 / 1.03-1.05; instructions a fit (callgrind)
moons(200) 0.972 / 0.987 (C = 1 / 10), moons(300) 1.013 at C = 1. A win of 1-3 % up to ~200 rows
only, and not the same bits: of 300 random problems one (305 rows, 4 classes, its pairs alone)
moved its decision values by 2e-11 (float32 R broke a near tie of WSS3's j): not taken."""

DOUBLED_PROBE_MAX_ROWS = 400
"""rbf problems up to this many rows (and ``DOUBLED_MAX_ROWS``) that start with the active sets'
probe (:func:`active_sets_apply`) run it, and SMO after it, on [D | D] (:func:`_probe_doubled`):
SMO goes on there when the probe does not hand over (small C, or features of low rank), with
``smo_distances``' cheaper steps and its Newton steps on faces of any size (``smo.smo_solve`` then
stopped at 100 free points, ``smo.NEWTON_MAX_FREE``: make_classification(n, 8, 5 informative,
flip_y=0.2) at C = 100 took 6,000-7,000 steps on D, 400-800 here). KernelSVM / SVC fit CPU, new rule
over old, median of 9 fits in shuffled order in one process, 192 sets x C (make_classification,
2-4 classes, pairs of 125-500 rows, d = 8 / 13 / 30, flip_y 0 / 0.2; load 2-5 on 2 cores; a
second copy of the old rule 0.97-1.18, median 1.02): C = 0.1 median 0.89 (0.81-1.06), C = 1 0.87
(0.65-1.02), C = 10 1.01 (0.80-1.07), C = 100 1.01 (0.25-1.08); pairs of ~350 rows at C = 100,
d = 8, flip_y 0.2: 4.4x SVC → 1.1x. A probe that hands over (C ≥ 10) pays for the larger fill
what its cheaper steps save. Up to 500 rows (one-vs-one pairs of 470-500) the same also closed
those at 470-500 rows (5.6x → 1.3x) but cost 1.13-1.15x where the probe hands over (the fill of
[D | D] ~0.25 ms more at 500 rows), probing on D and copying to [D | D] only when SMO goes on
1.1-1.26x on easy sets at C ≤ 1 (the copy, 0.3 ms): not taken. A longer probe on [D | D] (n // 6,
4, 3 steps) did not win on balance. Not on the shared matrix of ``solve_on_shared_matrix`` (its
pairs take their blocks)."""

BATCHED_MIN_ROWS = 8000
"""Binary problems with at least this many rows use the batched working-set solver; smaller ones
the one-pair SMO (per step it is lighter in Python, and its row cache holds most of the kernel)."""


def _mostly_free(alpha: np.ndarray, C: float) -> bool:
    """At least two α_t free (0 < α_t < C), and no fewer free than at C."""
    n_free = int(np.count_nonzero((alpha > 0.0) & (alpha < C)))
    return n_free >= max(2, int(np.count_nonzero(alpha >= C)))


def _hand_over(alpha: np.ndarray, X: np.ndarray, C: float) -> bool:
    """Whether SMO's α should seed the active sets: :func:`_mostly_free` and features of rank
    ≥ ``ACTIVE_SET_MIN_FEATURES``."""
    return _mostly_free(alpha, C) and rank_at_least(X, ACTIVE_SET_MIN_FEATURES)


def dense_applies(n: int, kernel: Any, cache_mb: float) -> bool:
    """Whether a binary problem of n rows computes its whole kernel matrix first: a named kernel,
    n ≤ ``DENSE_MAX_ROWS``, and its 8 n² bytes within cache_mb."""
    return not callable(kernel) and n <= DENSE_MAX_ROWS and 8 * n * n <= cache_mb * 2**20


def active_sets_apply(n: int, d: int, C: float, max_iter: int | None, kernel: Any) -> bool:
    """Whether a small problem of n rows and d features starts with the SMO probe that may hand
    over to the active sets: ``ACTIVE_SET_MIN_ROWS`` ≤ n < ``ACTIVE_SET_MAX_ROWS``, d ≥
    ``ACTIVE_SET_MIN_FEATURES``, finite C, no max_iter, not sigmoid."""
    return (
        ACTIVE_SET_MIN_ROWS <= n < ACTIVE_SET_MAX_ROWS
        and d >= ACTIVE_SET_MIN_FEATURES
        and math.isfinite(C)
        and max_iter is None
        and kernel != "sigmoid"
    )


def doubled_fits(n: int, kernel: Any, C: float, cache_mb: float) -> bool:
    """Whether a problem of n rows may run its SMO on [D | D] (``solvers.smo_distances``): rbf,
    finite C, :func:`dense_applies`, n ≤ ``DOUBLED_MAX_ROWS`` and the 16 n² bytes within
    cache_mb."""
    return (
        kernel == "rbf"
        and dense_applies(n, kernel, cache_mb)
        and math.isfinite(C)
        and n <= DOUBLED_MAX_ROWS
        and 16 * n * n <= cache_mb * 2**20
    )


def doubled_applies(
    n: int, d: int, kernel: Any, C: float, max_iter: int | None, cache_mb: float
) -> bool:
    """Whether a problem of n rows and d features is solved on [D | D] by
    ``solvers.smo_distances`` alone: :func:`doubled_fits`, not :func:`active_sets_apply`."""
    return doubled_fits(n, kernel, C, cache_mb) and not active_sets_apply(n, d, C, max_iter, kernel)


def doubled_probe_applies(
    n: int, d: int, kernel: Any, C: float, max_iter: int | None, cache_mb: float
) -> bool:
    """Whether a problem of n rows and d features probes on [D | D] (:func:`_probe_doubled`):
    :func:`doubled_fits`, :func:`active_sets_apply` and n ≤ ``DOUBLED_PROBE_MAX_ROWS``."""
    return (
        n <= DOUBLED_PROBE_MAX_ROWS
        and doubled_fits(n, kernel, C, cache_mb)
        and active_sets_apply(n, d, C, max_iter, kernel)
    )


def solve_dual(
    X: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    kernel: Any,
    kw: dict[str, Any],
    tol: float,
    max_iter: int | None,
    cache_mb: float,
) -> SMOResult:
    """One binary problem's dual: batched working sets (large problems), else active sets after
    an SMO probe, else one-pair SMO. ``kw`` are the kernel's gamma, degree and coef0."""
    common = {"tol": tol, "max_iter": max_iter, "cache_mb": cache_mb}
    n = y_pm.size
    if n >= BATCHED_MIN_ROWS:
        diag = kernel_diagonal(X, kernel, **kw)
        rbf64 = kernel == "rbf" and not float32_blocks(X, kernel, kw["gamma"])
        dtype = np.float64 if rbf64 else np.float32
        block = kernel_block_function(X, kernel, **kw, dtype=dtype)
        newton = kernel == "rbf"
        exact = None if rbf64 else kernel_block_function(X, kernel, **kw, dtype=np.float64)
        return batched_smo_solve(
            block, diag, y_pm, C, dtype=dtype, newton=newton, exact_block=exact, **common
        )
    with workspace() as empty:  # the kernel matrix and rows: buffers kept from the last solve
        if doubled_applies(n, X.shape[1], kernel, C, max_iter, cache_mb):  # SMO alone
            W = dense_kernel_matrix(X, kernel, kw, empty, doubled=True)
            return _smo_doubled(W, y_pm, C, common, empty)
        if doubled_probe_applies(n, X.shape[1], kernel, C, max_iter, cache_mb):
            W = dense_kernel_matrix(X, kernel, kw, empty, doubled=True)
            return _probe_doubled(X, W, y_pm, C, common, empty)
        M = (
            dense_kernel_matrix(X, kernel, kw, empty)
            if dense_applies(n, kernel, cache_mb)
            else None
        )
        return _solve_small(X, y_pm, C, kernel, kw, None, common, empty, M)


def shared_matrix_applies(
    n: int, n_problems: int, subsets: bool, kernel: Any, cache_mb: float
) -> bool:
    """Whether several problems over n rows take their dense matrices from one kernel matrix of
    all rows (:func:`solve_on_shared_matrix`): more than one problem, the n rows' matrix within
    :func:`dense_applies`, and, when some problem holds only a subset of the rows (one-vs-one), at
    most ``SHARED_SUBSET_MAX_ROWS`` rows."""
    return (
        n_problems > 1
        and dense_applies(n, kernel, cache_mb)
        and (not subsets or n <= SHARED_SUBSET_MAX_ROWS)
    )


class _Rows:
    """R's rows by index through ``get`` (R[i], a view made per call) and its row count: an
    ``smo_distances.InverseRows`` that never misses, without making n views first (a dict
    of moons' 400 rows costs ~40 µs; a view a step ~0.1 µs)."""

    __slots__ = ("_n", "get")

    def __init__(self, R: np.ndarray) -> None:
        self.get = R.__getitem__
        self._n = R.shape[0]

    def __len__(self) -> int:
        return self._n


def filled_inverse_applies(n: int, cache_mb: float) -> bool:
    """Whether problems on the [D | D] of n rows get all of R = D^(−1/2) from the fill:
    n ≤ ``FILLED_INVERSE_MAX_ROWS`` and [D | D] and R (24 n² bytes) within cache_mb."""
    return n <= FILLED_INVERSE_MAX_ROWS and 24 * n * n <= cache_mb * 2**20


def solve_on_shared_matrix(
    X: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray]],
    C: float,
    kernel: Any,
    kw: dict[str, Any],
    tol: float,
    max_iter: int | None,
    cache_mb: float,
    rows: list[np.ndarray | None] | None = None,
) -> list[SMOResult]:
    """Every (row mask, ±1 targets) problem's dual as :func:`solve_dual` would solve it on a dense
    matrix, from one kernel matrix of all rows instead of one filled anew (110 µs a pair, mostly
    fixed cost): a problem that SMO solves alone on [D | D] runs on the [D | D] of all rows, the
    others' rows kept out of its sets (no copy; D^(−1/2) made once for all problems, whole by the
    fill within ``FILLED_INVERSE_MAX_ROWS`` rows), any other takes its block (two ``take``: 15 µs
    on wine's pairs). ``rows`` (None: made here) gives each problem's rows, ``mask.nonzero()[0]``,
    or None for a problem of all rows."""
    results = []
    common = {"tol": tol, "max_iter": max_iter, "cache_mb": cache_mb}
    n = X.shape[0]
    d = X.shape[1]
    if rows is None:  # a problem of all rows has n targets: no mask.all(), ~1.5 µs each
        rows = [None if y_pm.size == n else mask.nonzero()[0] for mask, y_pm in problems]
    # SMO alone on [D | D]: the test depends on the problem's size only (pairs share sizes)
    doubled: dict[int, bool] = {}
    on_whole = []
    for _, y_pm in problems:
        m = y_pm.size
        if m not in doubled:
            doubled[m] = doubled_applies(m, d, kernel, C, max_iter, cache_mb) and (
                m == n or 16 * n * n <= cache_mb * 2**20
            )
        on_whole.append(doubled[m])
    with workspace() as outer:
        W_all = None
        # rows of D^(−1/2) of all rows, for every problem: all from the fill, or made as needed
        inverse: dict[int, np.ndarray] | InverseRows = {}
        if any(on_whole):
            R = outer((n, n)) if filled_inverse_applies(n, cache_mb) else None
            W_all = dense_kernel_matrix(X, kernel, kw, outer, doubled=True, inverse=R)
            if R is not None:
                inverse = _Rows(R)
            M_all = W_all[:, :n]
        else:
            M_all = dense_kernel_matrix(X, kernel, kw, outer)
        for (_, y_pm), whole, picked_rows in zip(problems, on_whole, rows, strict=True):
            if whole:
                results.append(
                    _smo_doubled(W_all, y_pm, C, common, outer, rows=picked_rows, inverse=inverse)
                )
                continue
            with workspace() as empty:  # a problem's buffers go back for the next one
                Xp, M = X, M_all
                if picked_rows is not None:
                    r = picked_rows.size
                    M, Xp, picked = empty((r, r)), X[picked_rows], empty((r, n))
                    # mode "clip" (the rows are valid): "raise" buffers the output, 2.7x slower
                    np.take(M_all, picked_rows, axis=0, out=picked, mode="clip")
                    np.take(picked, picked_rows, axis=1, out=M, mode="clip")
                results.append(_solve_small(Xp, y_pm, C, kernel, kw, None, common, empty, M))
    return results


def _solve_small(
    X: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    kernel: Any,
    kw: dict[str, Any],
    diag: np.ndarray | None,
    common: dict[str, Any],
    empty: Empty,
    M: np.ndarray | None,
) -> SMOResult:
    """:func:`solve_dual` below ``BATCHED_MIN_ROWS``, but for SMO alone on [D | D]
    (:func:`_smo_doubled`): on the dense kernel matrix M
    (:func:`.kernel_matrices.dense_kernel_matrix`: D = 1 − K for rbf) or a row cache (M None),
    SMO, and the active sets after a probe. ``diag``: k(x, x) (None: made here)."""
    max_iter, cache_mb = common["max_iter"], common["cache_mb"]
    n = y_pm.size
    if diag is None:
        diag = kernel_diagonal(X, kernel, **kw)
    cache: KernelRowCache | DenseKernelRows
    block: Callable[..., None] | None = None
    if M is not None:
        rbf = kernel == "rbf"  # the matrix holds D = 1 − K
        cache, block = DenseKernelRows(M, distances=rbf), matrix_block(M, rbf)
    else:
        cache = KernelRowCache(kernel_row_function(X, kernel, **kw), n, cache_mb, empty)
    smo_args = {"floor_curvature": kernel != "rbf", "cache": cache, "newton": True, **common}

    def smo(**kw_smo: Any) -> SMOResult:
        """SMO from ``start`` (or α = 0), stopping where ``stop_if`` says."""
        return smo_solve(None, diag, y_pm, C, **kw_smo, **smo_args)

    if active_sets_apply(n, X.shape[1], C, max_iter, kernel):

        def sets_blocks() -> tuple[Callable[..., None], Any, float]:
            """The active sets' kernel blocks, their dtype and the probe's bytes (one budget for
            both: its rows stay alive for a resumed SMO); rbf rows: float32 blocks (SIMD
            exponential) when their error bound allows."""
            if block is None:
                dtype = np.float32 if float32_blocks(X, kernel, kw["gamma"]) else np.float64
                return kernel_block_function(X, kernel, **kw, dtype=dtype), dtype, cache.nbytes
            return block, np.float64, cache.nbytes

        res = _probe_then_sets(X, y_pm, C, diag, smo, sets_blocks, common, empty)
    else:
        res = smo()
    if isinstance(cache, DenseKernelRows):
        res.n_kernel_rows = n  # each row computed once, in the matrix
    return res


def _probe_then_sets(
    X: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    diag: np.ndarray,
    smo: Callable[..., SMOResult],
    sets_blocks: Callable[[], tuple[Callable[..., None], Any, float]],
    common: dict[str, Any],
    empty: Empty,
) -> SMOResult:
    """SMO alone unless, after its first n // ``PROBE_FRACTION`` steps, the sets look ready
    (:func:`_hand_over`): then the active sets from the probe, on ``sets_blocks()`` (their kernel
    blocks, dtype and the bytes already held, made only then), and SMO resumed from the probe
    when they give up. ``smo(**kw)``: SMO with ``stop_if`` or ``start``."""
    n = y_pm.size
    hand_over = (max(1, n // PROBE_FRACTION), functools.partial(_hand_over, X=X, C=C))
    probe = smo(stop_if=hand_over)
    if probe.converged:
        return probe
    block, dtype, held = sets_blocks()
    sets = active_set_solve(
        block,
        diag,
        y_pm,
        C,
        tol=common["tol"],
        cache_mb=max(common["cache_mb"] - held / 2**20, 0.0),
        block_dtype=dtype,
        start=probe,
        empty=empty,
    )
    if sets is None:
        return smo(start=probe)
    sets.n_iter += probe.n_iter
    sets.n_kernel_rows += probe.n_kernel_rows
    return sets


def _probe_doubled(
    X: np.ndarray,
    W: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    common: dict[str, Any],
    empty: Empty,
) -> SMOResult:
    """:func:`_probe_then_sets` with SMO on W = [D | D] of X's rows (:func:`_smo_doubled`). The
    active sets read row t of D as row 2t of W seen as 2n × n (contiguous: ``take`` of the
    strided left half copies all of it first)."""
    n = y_pm.size

    def sets_blocks() -> tuple[Callable[..., None], Any, float]:
        twice = matrix_block(W.reshape(2 * n, n), True)

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            """K[idx][:, cols] from D's rows in W."""
            twice(2 * idx, out, cols)

        return block, np.float64, W.nbytes

    smo = functools.partial(_smo_doubled, W, y_pm, C, common, empty)
    res = _probe_then_sets(X, y_pm, C, np.ones(n), smo, sets_blocks, common, empty)
    res.n_kernel_rows = n  # each row computed once, in the matrix
    return res


def _smo_doubled(
    W: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    common: dict[str, Any],
    empty: Empty,
    **kw_smo: Any,
) -> SMOResult:
    """SMO with face Newton steps on W = [D | D] (``solvers.smo_distances``), the rows of
    D^(−1/2) kept within what ``cache_mb`` leaves beside W; ``kw_smo`` (``rows``, ``inverse``,
    ``start``, ``stop_if``) goes to the solver."""
    res = smo_solve_distances(
        W,
        y_pm,
        C,
        common["tol"],
        common["max_iter"],
        max_inverse_rows=_inverse_rows_kept(W, common["cache_mb"]),
        empty=empty,
        newton=True,
        **kw_smo,
    )
    res.n_kernel_rows = y_pm.size  # each row computed once, in the matrix
    return res


def _inverse_rows_kept(W: np.ndarray, cache_mb: float) -> int:
    """Rows of D^(−1/2) that SMO on W = [D | D] may keep: what ``cache_mb`` leaves beside W, at
    8 n bytes a row."""
    return int(max(cache_mb * 2**20 - W.nbytes, 0.0) // (8 * W.shape[0]))
