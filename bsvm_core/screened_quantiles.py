"""Tail order statistics of x̃'w̃_g computed from the few draws that can reach each block's tails.

The rows go through in k-d blocks of their whitened axes (``draw_screen``). For a block, the
guide (``draw_quantiles.tail_guide``: exact moments and Cornish-Fisher positions, widened by
its worst error on the previous block) gives the largest lower position Z_lo of its rows; the
screen keeps the draws whose bound over the block reaches Z_lo, and only their values are
computed: one gemm of the block's rows with those draws, one selection per row. Every value
the screen drops lies above τ = x̃'w̄ + σZ_lo − slack, a bound that holds for the computed values
too, so a row whose selected order statistics lie at or below its τ has them exactly (the
values at or below τ are all among the kept ones); the upper tail likewise. Rows where that
check fails, and rows the screen cannot bound (no spread, guide not finite), go through the
whole-row selection of ``draw_quantiles.order_statistics``. The values are the same BLAS
products as the whole matrix's (``draw_screen.products``), so the result does not depend on
the screen.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import draw_quantiles as dq
from .draw_screen import (
    COLUMN_MULTIPLE,
    UNIT_ROUNDOFF,
    WhiteDraws,
    block_bounds,
    gathered_products,
    kd_blocks,
    products,
    row_axes,
    whiten_draws,
)

BLOCK_ROWS = 128
"""Rows per screened block: smaller blocks have tighter bounds but more calls per row."""

FIRST_MARGIN = 0.5
"""SDs by which a thread's first block's limits overshoot the guide's positions (the later
blocks' margins are learnt): rows it misses go whole, as a first block did before."""


class _Scratch:
    """A thread's working memory: the whole rows' two masks, and flat buffers for the gathered
    products and their mask that grow to the largest block × kept draws seen."""

    def __init__(self, step: int, G: int) -> None:
        self.mask = np.empty((2, step, G), dtype=bool)
        self.values = np.empty(0)
        self.flags = np.empty(0, dtype=bool)

    def reserve(self, size: int) -> None:
        """Buffers of at least ``size`` values."""
        if self.values.size < size:
            self.values = np.empty(size)
            self.flags = np.empty(size, dtype=bool)


@dataclass(frozen=True)
class _Problem:
    """One projection problem's rows, draws, ranks and per-row guide and screen quantities."""

    Xt: np.ndarray
    Wt: np.ndarray
    draws: WhiteDraws
    ranks: list[int]
    n_low: int
    tails: tuple[int, int]
    guide: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # mu, sd, z_lo, z_hi
    unit: np.ndarray
    sigma: np.ndarray
    slack: np.ndarray
    step: int  # rows whose every value is computed at once


def screened_statistics(
    X: np.ndarray,
    Wt: np.ndarray,
    moments: tuple[np.ndarray, ...],
    ranks: list[int],
    step: int,
    budget_rows: int,
    n_threads: int,
) -> np.ndarray | None:
    """Order statistics ``ranks`` (all in the outer quarters) of each row of [1, X] @ Wt, (n, r).

    None when the draws have no spread to whiten. Screened blocks hold at most ``budget_rows`` rows
    (all their values would fit the memory budget), whole rows go ``step`` at a time;
    ``n_threads`` threads share the blocks.
    """
    draws = whiten_draws(Wt, moments[0], moments[1])
    tails = dq._tails(ranks, Wt.shape[1])
    if draws is None or tails is None:
        return None
    n = X.shape[0]
    Xt = np.column_stack([np.ones(n), X])
    guide = _guide(Xt, moments, tails, Wt.shape[1])
    unit, sigma, slack = row_axes(Xt, draws)
    needed = [0, 1] + [2 + i for i in (0, 1) if tails[i]]  # a tail not needed has no position
    usable = (sigma > 0) & np.isfinite(slack) & np.all(np.isfinite(guide[needed]), axis=0)
    n_low = sum(r < tails[0] for r in ranks)
    problem = _Problem(Xt, Wt, draws, ranks, n_low, tails, guide, unit, sigma, slack, step)
    size = min(BLOCK_ROWS, budget_rows)
    screened = np.flatnonzero(usable)
    # the k-d tree's top levels here, a few subtrees per thread; each thread splits its own
    tops = kd_blocks(unit, screened, max(size, -(-screened.size // (4 * n_threads))))
    odd = np.flatnonzero(~usable)
    tops += [odd[i : i + step] for i in range(0, odd.size, step)]
    stats = np.empty((n, len(ranks)))
    parts = _share(tops, n_threads)

    def run(part: list[np.ndarray]) -> None:
        scratch = _Scratch(step, Wt.shape[1])
        margins = (FIRST_MARGIN, FIRST_MARGIN)  # then the guide's error on the last block
        for top in part:
            if not usable[top[0]]:
                stats[top] = _whole_rows(problem, top, scratch.mask)
                continue
            for rows in kd_blocks(unit, top, size):
                stats[rows] = _screened_block(problem, rows, margins, scratch)
                mu, sd, z_lo, z_hi = (v[rows] for v in guide)
                margins = dq._learn_margins(stats[rows], n_low, mu, sd, (z_lo, z_hi)) or margins

    if len(parts) == 1:
        run(parts[0])
    else:
        with ThreadPoolExecutor(len(parts)) as pool:
            list(pool.map(run, parts))
    return stats


def _guide(
    Xt: np.ndarray, moments: tuple[np.ndarray, ...], tails: tuple[int, int], G: int
) -> np.ndarray:
    """(4, n): each row's mean, SD and guide positions, ``GUIDE_ROWS`` rows at a time."""
    out = np.empty((4, Xt.shape[0]))
    for start in range(0, Xt.shape[0], dq.GUIDE_ROWS):
        rows = slice(start, start + dq.GUIDE_ROWS)
        out[:, rows] = dq.tail_guide(Xt[rows], moments, tails, G)
    return out


def _share(blocks: list[np.ndarray], n_threads: int) -> list[list[np.ndarray]]:
    """The row sets in order, cut into at most ``n_threads`` runs of about equal row counts."""
    n = sum(b.size for b in blocks)
    share = -(-n // max(1, n_threads))
    parts: list[list[np.ndarray]] = [[]]
    taken = 0
    for rows in blocks:
        if taken >= share * len(parts) and len(parts) < n_threads:
            parts.append([])
        parts[-1].append(rows)
        taken += rows.size
    return [p for p in parts if p]


def _whole_rows(problem: _Problem, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Order statistics of the rows' every value (``draw_quantiles.order_statistics``), ``step``
    rows at a time."""
    out = np.empty((rows.size, len(problem.ranks)))
    for start in range(0, rows.size, problem.step):
        part = rows[start : start + problem.step]
        F = products(problem.Xt[part], problem.Wt)
        out[start : start + part.size] = dq.order_statistics(F, problem.ranks, mask[:, : part.size])
    return out


def _screened_block(
    problem: _Problem, rows: np.ndarray, margins: tuple[float, float], scratch: _Scratch
) -> np.ndarray:
    """The block's order statistics from the draws its screen keeps; missed rows whole."""
    p = problem
    G = p.Wt.shape[1]
    mu, sd, z_lo, z_hi = (v[rows] for v in p.guide)
    sigma, slack = p.sigma[rows], p.slack[rows]
    lower, upper = block_bounds(p.unit[rows], p.draws)
    out = np.empty((rows.size, len(p.ranks)))
    missed = np.zeros(rows.size, dtype=bool)
    Xt = p.Xt[rows]
    for side in (1, -1):
        cols = slice(0, p.n_low) if side == 1 else slice(p.n_low, None)
        if side == 1:  # lower tail: values ≤ the rows' limits
            if not p.n_low:
                continue
            bound = float(z_lo.max()) + margins[0]
            keep = np.flatnonzero(lower <= bound)
            limit = np.minimum(mu + (z_lo + margins[0]) * sd, tail_limit(mu, sigma, slack, bound))
            depths = p.ranks[cols]
        else:  # upper tail, mirrored
            if p.n_low == len(p.ranks):
                continue
            bound = float(z_hi.min()) - margins[1]
            keep = np.flatnonzero(upper >= bound)
            limit = np.maximum(
                mu + (z_hi - margins[1]) * sd, -tail_limit(-mu, sigma, slack, -bound)
            )
            depths = [G - 1 - r for r in p.ranks[cols]]
        if keep.size <= max(depths):
            missed[:] = True
            break
        scratch.reserve(max(2, rows.size) * (keep.size + COLUMN_MULTIPLE))
        F = gathered_products(Xt, p.Wt, keep, scratch.values, side * np.inf)
        out[:, cols], short = select_tail(F, depths, limit, side, scratch.flags)
        missed |= short
    if missed.any():
        out[missed] = _whole_rows(p, rows[missed], scratch.mask)
    return out


def select_tail(
    F: np.ndarray, depths: list[int], limit: np.ndarray, side: int, scratch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's values at ``depths`` (0: the smallest, side 1; the largest, side −1) from its
    values ≤ ``limit`` (side 1) or ≥ it (side −1), in ascending order of value; rows with too few
    such values are reported missed.

    As ``draw_quantiles.select_beyond``, one tail: the values beyond the limit packed into a
    narrow matrix whose gaps hold a value just inside it.
    """
    m, width = F.shape
    mask = scratch[: m * width].reshape(m, width)
    (np.less_equal if side == 1 else np.greater_equal)(F, limit[:, None], out=mask)
    packed = dq._pack(F, mask, np.nextafter(limit, side * np.inf), max(depths) + 1)
    last = packed.shape[1] - 1
    out = dq._partition(packed, depths if side == 1 else [last - d for d in depths])
    deepest = out[:, -1] if side == 1 else out[:, 0]
    return out, ~(side * deepest <= side * limit)


def tail_limit(mu: np.ndarray, sigma: np.ndarray, slack: np.ndarray, bound: float) -> np.ndarray:
    """τ = μ + σZ − slack, rounded down: every value whose screen bound exceeds Z lies above τ.

    A value x̃'w̃_g ≥ μ + σ·lower_g − slack, and lower_g > Z; the subtraction of 4u(|μ| + |σZ| +
    slack) covers the rounding of τ's own three operations.
    """
    sz = sigma * bound
    return mu + sz - slack - 4 * UNIT_ROUNDOFF * (np.abs(mu) + np.abs(sz) + slack)
