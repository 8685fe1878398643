"""Equal-tailed quantiles of linear projections of posterior draws, row block by row block.

For rows x̃ (n, k) and draws W (k, G), the quantiles over g of F = x̃ W are those of
``np.quantile(F, q, axis=1)`` with numpy's default "linear" rule (Hyndman & Fan 1996, type 7:
virtual index (G − 1) q, linear interpolation between the two neighbouring order statistics). The
full (n, G) matrix is never built: rows go through in cache-sized blocks within a memory budget,
and each block finds its order statistics by selection instead of a sort. Per-row thresholds that
hold a few more than the needed number of smallest (largest) values come from a guide: the exact
mean, SD, skewness and kurtosis of each row's values (from the draws' moment tensors) and their
Cornish-Fisher quantiles, widened by the guide's worst error on the previous block. One comparison
pass and one compaction keep only the candidates beyond the thresholds, and a small selection
among them gives the exact order statistics; the selected values themselves show whether the
thresholds held. Rows they miss go through thresholds from a sub-sample of the row, and wide
intervals (tails beyond a quarter of the draws) or rows still missed through ``np.partition``.
Rows go through grouped by the axis along which they project the draws, with the draws laid out
in their group's order (``draw_order``): a row's candidates then sit in long runs at the two ends,
which makes the compaction about twice as cheap (one group, and no sort, when there are few
rows or the tails are wide). Threads share the rows: every heavy step is a numpy call that
releases the GIL.

When every quantile lies in the outer quarters and the draws vary, ``projection_quantiles`` goes
through ``screened_quantiles`` instead, which computes only the values of the draws a bound lets
reach each block's tails (``draw_screen``) and selects among them with the functions here; the
path above remains for the rows it cannot bound or misses, for wide intervals and for draws
without spread.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import special

from ._blas import single_blas_thread
from .draw_order import draw_order, group_rows, n_groups_for

DEFAULT_MAX_BYTES = 64 * 2**20
"""Working-memory budget of one block (the values of F plus two boolean masks), in bytes."""

BYTES_PER_VALUE = 10
"""Memory per entry of a block: float64 value (8) and two comparison masks (1 + 1)."""

CACHE_BLOCK_BYTES = 4 * 2**20
"""Blocks are kept near this size (float64 values): within the last-level cache, and large enough
that the per-block Python calls (about 160 µs) stay a small share of the work."""

SUBSAMPLE = 512
"""Draws per row that estimate the selection thresholds."""

MARGIN_SD = 3.0
"""Standard deviations of the sub-sample count by which a threshold overshoots the tail."""

MAX_DEFAULT_THREADS = 4
"""Threads ``default_threads`` uses at most: the heavy steps are numpy calls that release the GIL."""

GUIDE_ROWS = 4096
"""Rows whose guide (moments and Cornish-Fisher positions) is computed at once."""

Z_MARGIN = 0.05
"""Slack, in SDs of a row's values, added to the guide's worst error on the previous block."""


def default_threads() -> int:
    """Threads for an interval when the caller names none: the machine's cores, 1 to 4."""
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_THREADS))


def linear_positions(n: int, q: float) -> tuple[int, int, float]:
    """numpy's "linear" rule: virtual index v = (n − 1) q → (floor v, its neighbour, v − floor v)."""
    virtual = (n - 1) * np.float64(q)
    below = int(np.floor(virtual))
    gamma = float(virtual - below)
    return min(max(below, 0), n - 1), min(max(below + 1, 0), n - 1), gamma


def lerp(a: np.ndarray, b: np.ndarray, gamma: float) -> np.ndarray:
    """a + (b − a) γ, or b − (b − a)(1 − γ) when γ ≥ ½, exactly as numpy's ``_lerp``."""
    diff = b - a
    if gamma >= 0.5:
        return b - diff * (1 - np.float64(gamma))
    return a + diff * np.float64(gamma)


def block_rows(n_draws: int, max_bytes: int | float = DEFAULT_MAX_BYTES) -> int:
    """Rows per block: the largest count within ``max_bytes`` and near ``CACHE_BLOCK_BYTES``."""
    per_row = n_draws * BYTES_PER_VALUE
    cache_rows = max(1, CACHE_BLOCK_BYTES // (8 * n_draws))
    return int(max(1, min(max_bytes // per_row, cache_rows)))


def _subsample_rank(n_sub: int, fraction: float) -> int:
    """Sub-sample rank whose value exceeds the ``fraction`` quantile with high probability."""
    mean = n_sub * fraction
    rank = math.ceil(mean + MARGIN_SD * math.sqrt(mean * (1 - fraction)) + 1)
    return min(max(rank, 0), n_sub - 1)


def _partition(F: np.ndarray, ranks: list[int]) -> np.ndarray:
    """Order statistics ``ranks`` (ascending) of each row, reordering F in place.

    One np.partition per rank on what lies above the previous one (numpy's multi-kth selection
    is slow when the kth are far apart), and a plain minimum for a rank right after another
    (swapped into place only when a rank follows).
    """
    out = np.empty((F.shape[0], len(ranks)))
    rows = np.arange(F.shape[0])
    done = 0  # the columns before ``done`` hold the ``done`` smallest values
    for i, r in enumerate(ranks):
        if i and r == ranks[i - 1] + 1 and i == len(ranks) - 1:  # the last: its value only
            out[:, i] = F[:, r:].min(axis=1)
        elif i and r == ranks[i - 1] + 1:  # == done: swap the minimum of the rest into place
            at = np.argmin(F[:, r:], axis=1) + r
            out[:, i] = F[rows, at]
            F[rows, at] = F[:, r]
            F[:, r] = out[:, i]
        else:
            F[:, done:].partition(r - done, axis=1)
            out[:, i] = F[:, r]
        done = r + 1
    return out


def _tails(ranks: list[int], G: int) -> tuple[int, int] | None:
    """(smallest values needed, largest values needed) when every rank lies in the outer quarters."""
    low = [r for r in ranks if r < G // 4]
    high = [r for r in ranks if r >= G - G // 4]
    if len(low) + len(high) < len(ranks):
        return None
    return max(low, default=-1) + 1, G - min(high, default=G)


def select_beyond(
    F: np.ndarray, ranks: list[int], t_lo: np.ndarray, t_hi: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Order statistics ``ranks`` of each row of F from its values ≤ t_lo or ≥ t_hi; rows missed.

    Each tail's candidates are packed into a narrow matrix of their own whose gaps hold a value
    just inside the threshold, nextafter(t_lo, +inf) or nextafter(t_hi, −inf), so the k-th smallest
    (largest) of a packed row is the row's own whenever at least the needed number of candidates
    lie at or below t_lo (at or above t_hi); the selected values themselves show whether they do
    (else the row is missed). Two packings select over about half the width one would, each tail
    on its own. ``mask`` is a (2, *F.shape) boolean scratch array.
    """
    n_rows, G = F.shape
    need_lo, need_hi = _tails(ranks, G)  # type: ignore[misc]
    low = [r for r in ranks if r < need_lo]
    high = [r for r in ranks if r >= need_lo]
    out = np.empty((n_rows, len(ranks)))
    missed = np.zeros(n_rows, dtype=bool)
    if low:
        np.less_equal(F, t_lo[:, None], out=mask[0])
        packed = _pack(F, mask[0], np.nextafter(t_lo, np.inf), need_lo)
        out[:, : len(low)] = _partition(packed, low)
        missed |= ~(out[:, len(low) - 1] <= t_lo)
    if high:
        np.greater_equal(F, t_hi[:, None], out=mask[1])
        packed = _pack(F, mask[1], np.nextafter(t_hi, -np.inf), need_hi)
        width = packed.shape[1]
        out[:, len(low) :] = _partition(packed, [width - G + r for r in high])
        missed |= ~(out[:, len(low)] >= t_hi)
    return out, missed


def _pack(F: np.ndarray, mask: np.ndarray, gap: np.ndarray, need: int) -> np.ndarray:
    """The values of F where ``mask`` holds, each row's packed to the left of a row at least
    ``need`` wide and filled with the row's ``gap`` value."""
    n_rows, G = F.shape
    flat = np.flatnonzero(mask)
    starts = np.searchsorted(flat, np.arange(n_rows + 1) * G)
    per_row = np.diff(starts)
    width = max(int(per_row.max(initial=0)), need)
    packed = np.empty((n_rows, width))
    packed[:] = gap[:, None]
    dest = np.repeat(np.arange(n_rows) * width - starts[:-1], per_row) + np.arange(flat.size)
    packed.ravel()[dest] = F.ravel()[flat]
    return packed


def subsample_thresholds(
    F: np.ndarray, need_lo: int, need_hi: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-row thresholds beyond which need_lo (need_hi) values lie with high probability.

    Order statistics of every ``G // SUBSAMPLE``-th value, a few standard deviations of the
    sub-sample count past the needed fraction; None when the sub-sample is too coarse.
    """
    n_rows, G = F.shape
    step = G // SUBSAMPLE
    if step < 4:
        return None
    sub = F[:, ::step].copy()
    n_sub = sub.shape[1]
    r_lo = _subsample_rank(n_sub, need_lo / G) if need_lo else -1
    r_hi = n_sub - 1 - _subsample_rank(n_sub, need_hi / G) if need_hi else n_sub
    if not r_lo < r_hi:
        return None
    stats = _partition(sub, [r for r in (r_lo, r_hi) if 0 <= r < n_sub])
    t_lo = stats[:, 0] if need_lo else np.full(n_rows, -np.inf)
    t_hi = stats[:, -1] if need_hi else np.full(n_rows, np.inf)
    return t_lo, t_hi


def order_statistics(
    F: np.ndarray,
    ranks: list[int],
    mask: np.ndarray | None = None,
    thresholds: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Order statistics ``ranks`` (0-based, ascending) of each row of F: (n_rows, len(ranks)).

    F may be reordered; ``mask`` is an optional (2, *F.shape) boolean scratch array. Ranks in the
    outer quarters are selected beyond per-row thresholds (``select_beyond``): the given ones
    first, then, for the rows they miss, thresholds from a sub-sample; anything else (other
    ranks, rows still missed) through np.partition of whole rows.
    """
    n_rows, G = F.shape
    tails = _tails(ranks, G)
    if tails is None:
        return _partition(F, ranks)
    if mask is None:
        mask = np.empty((2, *F.shape), dtype=bool)
    out = np.empty((n_rows, len(ranks)))
    todo = np.arange(n_rows)
    if thresholds is not None:
        out[:], missed = select_beyond(F, ranks, *thresholds, mask)
        todo = np.flatnonzero(missed)
    if todo.size:
        rest = F[todo] if todo.size < n_rows else F
        guess = subsample_thresholds(rest, *tails)
        if guess is None:
            out[todo] = _partition(rest, ranks)
            return out
        out[todo], missed = select_beyond(rest, ranks, *guess, mask[:, : todo.size])
        if missed.any():
            out[todo[missed]] = _partition(rest[missed], ranks)
    return out


def cornish_fisher(z: float, skew: np.ndarray, kurt: np.ndarray) -> np.ndarray:
    """z + (z² − 1)γ₁/6 + (z³ − 3z)γ₂/24 − (2z³ − 5z)γ₁²/36 (Cornish & Fisher 1937, to order n⁻¹)."""
    return (
        z
        + (z * z - 1.0) * skew / 6.0
        + (z**3 - 3.0 * z) * kurt / 24.0
        - (2.0 * z**3 - 5.0 * z) * skew**2 / 36.0
    )


def draw_moments(Wt: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean w̄ and central moment tensors M₂, M₃ (k², k) and M₄ (k², k²) of the draws' columns."""
    k, G = Wt.shape
    centre = Wt.mean(axis=1)
    D = Wt - centre[:, None]
    DD = (D[:, None, :] * D[None, :, :]).reshape(k * k, G)
    return centre, D @ D.T / G, DD @ D.T / G, DD @ DD.T / G


def tail_guide(
    Xt: np.ndarray, moments: tuple[np.ndarray, ...], tails: tuple[int, int], G: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, SD and predicted standardised positions of each row's needed lower and upper statistics.

    The exact mean x̃'w̄, SD (x̃'M₂x̃)^½, skewness and excess kurtosis of the row's values over the
    draws (from the moment tensors), and Cornish-Fisher quantiles at need/G. NaN where the SD is 0.
    """
    centre, M2, M3, M4 = moments
    XX = (Xt[:, :, None] * Xt[:, None, :]).reshape(Xt.shape[0], -1)
    mu = Xt @ centre
    var = np.maximum(np.einsum("ij,jk,ik->i", Xt, M2, Xt), 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        skew = np.einsum("ij,ij->i", XX @ M3, Xt) / var**1.5
        kurt = np.einsum("ij,ij->i", XX @ M4, XX) / var**2 - 3.0
        z_lo, z_hi = special.ndtri(tails[0] / G), -special.ndtri(tails[1] / G)
        return mu, np.sqrt(var), cornish_fisher(z_lo, skew, kurt), cornish_fisher(z_hi, skew, kurt)


def _learn_margins(
    stats: np.ndarray,
    n_low: int,
    mu: np.ndarray,
    sd: np.ndarray,
    guide: tuple[np.ndarray, np.ndarray],
) -> tuple[float, float] | None:
    """How far (in SDs) the guide erred on this block, worst row, plus ``Z_MARGIN``.

    The next block's thresholds sit that far beyond the guide's positions; rows they still miss
    go through the sub-sample route.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        err_lo = (stats[:, n_low - 1] - mu) / sd - guide[0] if n_low else np.zeros(1)
        err_hi = guide[1] - (stats[:, n_low] - mu) / sd if n_low < stats.shape[1] else np.zeros(1)
    err_lo, err_hi = err_lo[np.isfinite(err_lo)], err_hi[np.isfinite(err_hi)]
    if err_lo.size == 0 or err_hi.size == 0:
        return None
    return float(err_lo.max()) + Z_MARGIN, float(err_hi.max()) + Z_MARGIN


def projection_quantiles(
    X: np.ndarray,
    W: np.ndarray,
    intercept: np.ndarray,
    quantiles: tuple[float, ...],
    max_bytes: int | float = DEFAULT_MAX_BYTES,
    n_threads: int = 1,
    screen: bool = True,
) -> np.ndarray:
    """``np.quantile([1, X] @ [b; W], quantiles, axis=1)``, X (n, d), W (d, G), b (G,), by blocks.

    Returns (len(quantiles), n): numpy's linear rule on the same products x̃'w̃_g, where x̃ = (1, x)
    and w̃_g = (b_g, w_g). A block holds at most ``max_bytes`` (at least one row); ``n_threads``
    threads share the rows (numpy releases the GIL in the heavy steps). ``screen=False`` computes
    every value (the path before ``screened_quantiles``; the bench compares the two).
    """
    return stacked_projection_quantiles(
        X, [W], [intercept], quantiles, max_bytes, n_threads, screen
    )[0]


def stacked_projection_quantiles(
    X: np.ndarray,
    Ws: list[np.ndarray],
    intercepts: list[np.ndarray],
    quantiles: tuple[float, ...],
    max_bytes: int | float = DEFAULT_MAX_BYTES,
    n_threads: int = 1,
    screen: bool = True,
) -> np.ndarray:
    """``projection_quantiles`` for several problems (W, b) on the same rows: (problems,
    len(quantiles), n). The screened problems share one pool of threads and one queue of work."""
    n, G = X.shape[0], Ws[0].shape[1] if Ws else 0
    Wts = [np.vstack([b[None, :], W]) for W, b in zip(Ws, intercepts, strict=True)]
    positions = [linear_positions(G, q) for q in quantiles]
    ranks = sorted({r for below, above, _ in positions for r in (below, above)})
    where = {r: i for i, r in enumerate(ranks)}
    result = np.empty((len(Wts), len(quantiles), n))
    n_threads = max(1, min(int(n_threads), n))
    step = block_rows(G, max_bytes / n_threads)
    moments = [draw_moments(Wt) for Wt in Wts]
    if n == 0:
        return result
    stats: list[np.ndarray | None] = [None] * len(Wts)
    # the products are thin ((rows, d + 1) × (d + 1, G)): BLAS's own threads only contend (one
    # thread of ours with OpenBLAS's two took 10× the CPU on a loaded machine); the threads, if
    # any, are the parallelism, each one's products on its own core
    with single_blas_thread():
        if _tails(ranks, G) is not None and screen:
            from .screened_quantiles import screened_statistics  # it builds on this module

            budget_rows = int(max(1, max_bytes / n_threads // (G * BYTES_PER_VALUE)))
            stats = screened_statistics(X, Wts, moments, ranks, step, budget_rows, n_threads)
        for p, Wt in enumerate(Wts):
            got = stats[p]
            if got is None:
                _blocked_quantiles(X, Wt, moments[p], positions, ranks, step, n_threads, result[p])
                continue
            for i, (below, above, gamma) in enumerate(positions):
                result[p, i] = lerp(got[:, where[below]], got[:, where[above]], gamma)
    return result


def _blocked_quantiles(
    X: np.ndarray,
    Wt: np.ndarray,
    moments: tuple[np.ndarray, ...],
    positions: list[tuple[int, int, float]],
    ranks: list[int],
    step: int,
    n_threads: int,
    result: np.ndarray,
) -> None:
    """The quantiles from every value, into ``result`` (len(positions), n): rows by blocks of
    ``step``, grouped by their axis, ``n_threads`` threads."""
    n, G = X.shape[0], Wt.shape[1]
    where = {r: i for i, r in enumerate(ranks)}
    tails = _tails(ranks, G)
    n_low = 0 if tails is None else sum(r < tails[0] for r in ranks)
    n_groups = 1 if tails is None else n_groups_for(n, step)  # whole-row partition: no runs
    if n_groups > 1:
        centres, labels = group_rows(X, moments[1], n_groups)
    else:  # one group: the draws' own order, no sort
        centres, labels = None, np.zeros(n, dtype=np.intp)
    segments = _segments(labels, step, n_threads)

    def run(part: list[tuple[int, np.ndarray]]) -> None:
        width = min(step, max((len(rows) for _, rows in part), default=1))
        values = np.empty((width, G))
        mask = np.empty((2, width, G), dtype=bool)
        margins: tuple[float, float] | None = None  # in SDs, learnt block by block
        group, Wg = -1, Wt
        for g, rows in part:
            if g != group and centres is not None:
                group, Wg = g, np.take(Wt, draw_order(centres[g], Wt), axis=1)
            Xt = np.column_stack([np.ones(rows.size), X[rows]])
            guides = None if tails is None else tail_guide(Xt, moments, tails, G)
            for start in range(0, rows.size, step):
                rel = slice(start, min(start + step, rows.size))
                m = rel.stop - rel.start
                F = np.matmul(Xt[rel], Wg, out=values[:m])
                if guides is None:
                    stats = order_statistics(F, ranks, mask[:, :m])
                else:
                    mu, sd, g_lo, g_hi = (v[rel] for v in guides)
                    guess = None
                    if margins is not None:
                        guess = (mu + (g_lo + margins[0]) * sd, mu + (g_hi - margins[1]) * sd)
                    stats = order_statistics(F, ranks, mask[:, :m], guess)
                    margins = _learn_margins(stats, n_low, mu, sd, (g_lo, g_hi))
                for i, (below, above, gamma) in enumerate(positions):
                    result[i, rows[rel]] = lerp(
                        stats[:, where[below]], stats[:, where[above]], gamma
                    )

    if n_threads == 1:
        run(segments[0])
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(run, segments))


def _segments(labels: np.ndarray, step: int, n_threads: int) -> list[list[tuple[int, np.ndarray]]]:
    """Rows in runs of one group (at most ``GUIDE_ROWS``, whole blocks), split among the threads.

    Group by group, each thread takes about n / n_threads rows; a run never spans two groups.
    """
    n = labels.size
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(labels.max(initial=0) + 2))
    share = -(-n // n_threads)
    chunk = max(1, min(GUIDE_ROWS, -(-share // 4)) // step) * step
    parts: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(n_threads)]
    taken = 0
    for g in range(bounds.size - 1):
        for start in range(int(bounds[g]), int(bounds[g + 1]), chunk):
            rows = order[start : min(start + chunk, int(bounds[g + 1]))]
            parts[min(taken // share, n_threads - 1)].append((g, rows))
            taken += rows.size
    return parts
