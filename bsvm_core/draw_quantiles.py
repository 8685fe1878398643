"""Equal-tailed quantiles of linear projections of posterior draws, row block by row block.

For rows x̃ (n, k) and draws W (k, G), the quantiles over g of F = x̃ W are those of
``np.quantile(F, q, axis=1)`` with numpy's default "linear" rule (Hyndman & Fan 1996, type 7:
virtual index (G − 1) q, linear interpolation between the two neighbouring order statistics). The
full (n, G) matrix is never built: rows go through in blocks within a memory budget, and each block
finds its order statistics by selection instead of a sort. A sub-sample of every row gives a
threshold that holds (with a margin of a few standard deviations) more than the needed number of
smallest (largest) values; one comparison pass and one compaction keep only those candidates, and
a small sort of the candidates gives the exact order statistics. Rows whose threshold falls short
(rare) and wide intervals (tails beyond a quarter of the draws) fall back to ``np.partition``.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

DEFAULT_MAX_BYTES = 64 * 2**20
"""Working-memory budget of one block (the values of F plus two boolean masks), in bytes."""

BYTES_PER_VALUE = 10
"""Memory per entry of a block: float64 value (8) and two comparison masks (1 + 1)."""

CACHE_BLOCK_BYTES = 2 * 2**20
"""Blocks are kept near this size (float64 values) so that they stay in the CPU cache."""

SUBSAMPLE = 512
"""Draws per row that estimate the selection thresholds."""

MARGIN_SD = 3.0
"""Standard deviations of the sub-sample count by which a threshold overshoots the tail."""


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
    is slow when the kth are far apart), and a plain minimum for a rank right after another.
    """
    out = np.empty((F.shape[0], len(ranks)))
    done = 0  # every column before ``done`` holds a value at most the previous rank's
    for i, r in enumerate(ranks):
        if i and r == ranks[i - 1] + 1:
            out[:, i] = F[:, done:].min(axis=1)
        else:
            F[:, done:].partition(r - done, axis=1)
            out[:, i] = F[:, r]
        done = r + 1
    return out


def order_statistics(F: np.ndarray, ranks: list[int], mask: np.ndarray | None = None) -> np.ndarray:
    """Order statistics ``ranks`` (0-based, ascending) of each row of F: (n_rows, len(ranks)).

    F may be reordered; ``mask`` is an optional boolean scratch array of F's shape. Ranks in the
    lowest and highest quarter are selected among candidates beyond two thresholds per row (from
    a sub-sample): the candidates are packed into a narrow matrix whose gaps hold a value p
    strictly between the thresholds, so the k-th smallest (largest) of a packed row is the row's
    own as long as at least the needed number of candidates lie below (above) the thresholds,
    which the selected values themselves prove. Other ranks, and rows whose thresholds fall
    short, go through np.partition of the whole row.
    """
    n_rows, G = F.shape
    low = [r for r in ranks if r < G // 4]
    high = [r for r in ranks if r >= G - G // 4]
    step = max(1, G // SUBSAMPLE)
    if len(low) + len(high) < len(ranks) or step < 4:
        return _partition(F, ranks)
    need_lo = max(low, default=-1) + 1  # smallest values needed
    need_hi = G - min(high, default=G)  # largest values needed
    sub = F[:, ::step].copy()
    n_sub = sub.shape[1]
    r_lo = _subsample_rank(n_sub, need_lo / G) if need_lo else -1
    r_hi = n_sub - 1 - _subsample_rank(n_sub, need_hi / G) if need_hi else n_sub
    if not r_lo < r_hi:
        return _partition(F, ranks)
    stats = _partition(sub, [r for r in (r_lo, r_hi) if 0 <= r < n_sub])  # r_lo < r_hi
    t_lo = stats[:, 0] if need_lo else np.full(n_rows, -np.inf)
    t_hi = stats[:, -1] if need_hi else np.full(n_rows, np.inf)
    if mask is None:
        mask = np.empty(F.shape, dtype=bool)
    np.less_equal(F, t_lo[:, None], out=mask)
    mask |= np.greater_equal(F, t_hi[:, None])
    flat = np.flatnonzero(mask)
    per_row = np.diff(np.searchsorted(flat, np.arange(n_rows + 1) * G))
    width = max(int(per_row.max()), need_lo + need_hi)
    packed = np.empty((n_rows, width))
    packed[:] = np.nextafter(t_lo, np.inf)[:, None]  # < t_hi wherever a row has a gap
    packed[np.arange(width) < per_row[:, None]] = F.ravel()[flat]
    shifted = [r if r < need_lo else width - G + r for r in ranks]
    out = _partition(packed, shifted)
    failed = np.zeros(n_rows, dtype=bool)
    if low:
        failed |= out[:, len(low) - 1] > t_lo
    if high:
        failed |= out[:, len(low)] < t_hi
    if failed.any():
        out[failed] = _partition(F[failed], ranks)
    return out


def projection_quantiles(
    X: np.ndarray,
    W: np.ndarray,
    intercept: np.ndarray,
    quantiles: tuple[float, ...],
    max_bytes: int | float = DEFAULT_MAX_BYTES,
    n_threads: int = 1,
) -> np.ndarray:
    """``np.quantile([1, X] @ [b; W], quantiles, axis=1)``, X (n, d), W (d, G), b (G,), by blocks.

    Returns (len(quantiles), n): numpy's linear rule on the same products x̃'w̃_g, where x̃ = (1, x)
    and w̃_g = (b_g, w_g). A block holds at most ``max_bytes`` (at least one row); ``n_threads``
    threads share the rows (numpy releases the GIL in the heavy steps).
    """
    n, G = X.shape[0], W.shape[1]
    Wt = np.vstack([intercept[None, :], W])
    positions = [linear_positions(G, q) for q in quantiles]
    ranks = sorted({r for below, above, _ in positions for r in (below, above)})
    where = {r: i for i, r in enumerate(ranks)}
    result = np.empty((len(quantiles), n))
    n_threads = max(1, min(int(n_threads), n))
    step = block_rows(G, max_bytes / n_threads)

    def run(rows: range) -> None:
        width = min(step, len(rows))
        values = np.empty((width, G))
        mask = np.empty((width, G), dtype=bool)
        Xt = np.ones((width, Wt.shape[0]))
        for start in range(rows.start, rows.stop, step):
            m = min(start + step, rows.stop) - start
            Xt[:m, 1:] = X[start : start + m]
            F = np.matmul(Xt[:m], Wt, out=values[:m])
            stats = order_statistics(F, ranks, mask[:m])
            for i, (below, above, gamma) in enumerate(positions):
                result[i, start : start + m] = lerp(
                    stats[:, where[below]], stats[:, where[above]], gamma
                )

    parts = [range(n * t // n_threads, n * (t + 1) // n_threads) for t in range(n_threads)]
    if n_threads == 1:
        run(parts[0])
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(run, parts))
    return result
