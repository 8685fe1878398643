"""Tail order statistics of x̃'w̃_g for several projection problems at once, computed from the few
draws that can reach each leaf's tails.

The rows go into leaves of a k-d tree of their whitened axes (``draw_screen``; one tree for all
problems, on the axes of every problem side by side). Each tail is handled as the lower tail of
side · x̃'w̃_g (the upper tail mirrored: its comparisons reversed), so one procedure serves both:

1. A pilot row per batch of leaves (its middle row) gets its order statistics from all its values;
   the median of its and its neighbours' errors against the guide (exact moments and
   Cornish-Fisher positions, ``draw_quantiles.tail_guide``) is the batch's correction e: a row's
   statistic is expected at z = guide + e SDs from its mean (``screen_guide``).
2. The batch's bound, then each leaf's, keeps the draws that reach Z = max z + ``SCREEN_MARGIN``
   over the leaf's rows; every dropped value lies above τ = μ + σZ − slack (``tail_limit``), for
   the computed values too.
3. Only the kept draws' values are computed: one gemm per leaf, with the same bits as the whole
   matrix's (``draw_screen.leaf_products``: the kept columns padded to 16 with a dropped draw).
4. ``band_selection.band_select`` counts each row's values ≤ μ + (z − ``BAND_HALF``)·SD and sorts
   the few up to min(μ + (z + ``BAND_HALF``)·SD, τ); the rows it misses go again below the band
   or up to τ, then with (−∞, τ]; rows whose tail reaches past τ, or the screen cannot bound, go
   whole.

A work item is a batch of leaves: both tails of every problem, each step one numpy call over all
the batch's rows (a gemm per leaf); the threads take batches from one queue (equal cost shares,
whatever the problem), and the problems' setups and the tree run in the same pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import draw_quantiles as dq
from .band_selection import band_select
from .draw_screen import (
    COLUMN_MULTIPLE,
    UNIT_ROUNDOFF,
    kd_blocks,
    leaf_products,
    products,
)
from .screen_guide import (
    Problem,
    Side,
    median_errors,
    new_problem,
    pilot_errors,
    pilot_row,
    problem_axes,
)

CHUNK_ROWS = 32768
"""Rows screened at once, at most: larger inputs go in chunks (bounded memory, no cliff)."""

LEAF_ROWS = 64
"""Rows per leaf: smaller leaves have tighter bounds (fewer values computed), but more gemms and
comparisons of a few µs each, which two threads contend for (the GIL): 64 is as fast as 32 alone
and faster with two threads (bench/results.md, issue 27 part 3)."""

BATCH_ROWS = 512
"""Rows per work item (a batch of leaves), at most: enough work per numpy call that the calls'
own cost and the GIL between them stay small, and enough items for the threads to share."""

SCREEN_MARGIN = 0.08
"""SDs by which a leaf's screen reaches past its rows' expected positions (pilot-corrected)."""

BYTES_PER_KEPT = 26
"""Working memory per kept value: the float64 value, the two limits repeated to it (float64) and
two comparison masks (1 + 1)."""

BAND_HALF = 0.08
"""Half-width, in SDs, of the band of values sorted around a row's expected position."""

BAND_SPAN = 8
"""Depths of one tail further apart than this are selected from the whole band (−∞, τ]."""


class _Scratch(threading.local):
    """A thread's working memory: flat buffers for a batch's values and masks, grown as needed
    up to ``limit`` values (or one leaf's)."""

    def __init__(self, limit: int) -> None:
        self.values = np.empty(0)
        self.flags = np.empty(0, dtype=bool)
        self.limit = limit  # kept values a batch's side holds at most (a leaf's may exceed it)

    def reserve(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, flags) of at least ``size`` and 2 · ``size`` entries."""
        if self.values.size < size:
            self.values = np.empty(size)
            self.flags = np.empty(2 * size, dtype=bool)
        return self.values, self.flags


def screened_statistics(
    X: np.ndarray,
    Wts: list[np.ndarray],
    moments: list[tuple[np.ndarray, ...]],
    ranks: list[int],
    step: int,
    budget_rows: int,
    n_threads: int,
) -> list[np.ndarray | None]:
    """Order statistics ``ranks`` (all in the outer quarters) of each row of [1, X] @ W̃ for each
    problem's W̃, (n, r) each; None for a problem whose draws have no spread to whiten.

    Leaves and batches hold at most ``budget_rows`` rows (all their values would fit the memory
    budget), whole rows go ``step`` at a time; ``n_threads`` threads share the batches. More
    than ``CHUNK_ROWS`` rows go in equal chunks, one after another (the per-row quantities of
    every problem, ~1 kB a row, are held for one chunk at a time).
    """
    n = X.shape[0]
    if n > CHUNK_ROWS:
        chunks = np.array_split(np.arange(n), -(-n // CHUNK_ROWS))
        parts = [
            screened_statistics(X[c], Wts, moments, ranks, step, budget_rows, n_threads)
            for c in chunks
        ]
        return [
            None if parts[0][p] is None else np.vstack([q[p] for q in parts])
            for p in range(len(Wts))
        ]  # type: ignore[misc]
    Xt = np.column_stack([np.ones(n), X])
    pool = ThreadPoolExecutor(n_threads) if n_threads > 1 else None
    mapped = map if pool is None else pool.map
    try:
        axes = list(mapped(lambda p: problem_axes(Xt, Wts[p], moments[p]), range(len(Wts))))
        live = [p for p, a in enumerate(axes) if a is not None]
        out: list[np.ndarray | None] = [None] * len(Wts)
        if not live or dq._tails(ranks, Wts[0].shape[1]) is None:
            return out
        usable = np.logical_and.reduce([axes[p][3] for p in live])  # type: ignore[index]
        leaf_rows = max(1, min(LEAF_ROWS, budget_rows))
        units = np.hstack([axes[p][1] for p in live])  # type: ignore[index]
        tree = (pool.submit if pool else _Done)(kd_blocks, units, np.flatnonzero(usable), leaf_rows)
        problems = list(
            mapped(lambda p: new_problem(Xt, Wts[p], moments[p], axes[p], ranks, step), live)
        )
        leaves = tree.result()
        batches = _batches(leaves, max(leaf_rows, min(BATCH_ROWS, budget_rows)))
        stats = [np.empty((n, len(ranks))) for _ in live]
        missed = [np.flatnonzero(~usable) for _ in live]
        lock = threading.Lock()
        limit = budget_rows * Wts[0].shape[1] * dq.BYTES_PER_VALUE // BYTES_PER_KEPT
        scratch = _Scratch(int(limit))
        pilots = np.array([pilot_row([leaves[leaf] for leaf in b]) for b in batches])
        errors = list(mapped(lambda p: median_errors(pilot_errors(p, pilots)), problems))

        def run(b: int) -> None:
            batch = _Batch.of([leaves[leaf] for leaf in batches[b]], Xt)
            for i, p in enumerate(problems):
                for (done, got, columns), lost in _batch(p, batch, errors[i][:, b], scratch):
                    stats[i][np.ix_(done, columns)] = got
                    if lost.size:
                        with lock:
                            missed[i] = np.concatenate([missed[i], lost])

        list(mapped(run, range(len(batches))))
    finally:
        if pool is not None:
            pool.shutdown()
    for i, p in enumerate(problems):
        rows = np.unique(missed[i])
        if rows.size:
            stats[i][rows] = _whole_rows(p, rows)
        out[live[i]] = stats[i]
    return out


class _Done:
    """``pool.submit`` without a pool: the call made at once, its value as ``result()``."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.value = fn(*args)

    def result(self) -> Any:
        """The call's value."""
        return self.value


def _batches(leaves: list[np.ndarray], rows: int) -> list[np.ndarray]:
    """Consecutive leaves (neighbours in the k-d tree) in runs of at most ``rows`` rows (at least
    one leaf)."""
    out: list[np.ndarray] = []
    start, taken = 0, 0
    for i, leaf in enumerate(leaves):
        if taken and taken + leaf.size > rows:
            out.append(np.arange(start, i))
            start, taken = i, 0
        taken += leaf.size
    if taken:
        out.append(np.arange(start, len(leaves)))
    return out


def _whole_rows(p: Problem, rows: np.ndarray) -> np.ndarray:
    """Order statistics of the rows' every value (``draw_quantiles.order_statistics``), ``step``
    rows at a time."""
    out = np.empty((rows.size, len(p.ranks)))
    mask = np.empty((2, min(p.step, rows.size), p.Wt.shape[1]), dtype=bool)
    for start in range(0, rows.size, p.step):
        part = rows[start : start + p.step]
        F = products(p.Xt[part], p.Wt)
        out[start : start + part.size] = dq.order_statistics(F, p.ranks, mask[:, : part.size])
    return out


@dataclass(frozen=True)
class _Batch:
    """Leaves' rows end to end: their indices, the leaves' sizes and first positions, and the
    rows of x̃ in that order (C-contiguous: a leaf's rows are a slice)."""

    rows: np.ndarray
    sizes: np.ndarray
    firsts: np.ndarray
    Xt: np.ndarray

    @classmethod
    def of(cls, leaves: list[np.ndarray], Xt: np.ndarray) -> _Batch:
        """The batch of ``leaves`` (rows of ``Xt``)."""
        sizes = np.array([leaf.size for leaf in leaves])
        rows = np.concatenate(leaves)
        return cls(rows, sizes, np.concatenate([[0], np.cumsum(sizes)[:-1]]), Xt[rows])

    def subset(self, leaves: np.ndarray) -> tuple[_Batch, np.ndarray]:
        """The batch of the leaves ``leaves`` (indices into this one's, ascending), and which of
        this one's rows it holds."""
        at = np.repeat(np.isin(np.arange(self.sizes.size), leaves), self.sizes)
        sizes = self.sizes[leaves]
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        return _Batch(self.rows[at], sizes, firsts, self.Xt[at]), at


def _batch(
    p: Problem, batch: _Batch, errors: np.ndarray, scratch: _Scratch
) -> list[tuple[tuple[np.ndarray, np.ndarray, list[int]], np.ndarray]]:
    """For each side of the problem: ((rows, statistics, their columns) done, rows missed), over a
    batch of leaves whose pilots erred by ``errors`` (one per side)."""
    # the leaves' boxes of ŷ, and the batch's: every draw's bound over the batch, both sides
    # (lower, −upper), screens the draws before the leaves' own bounds do
    U = p.unit[batch.rows]
    top = np.maximum.reduceat(U, batch.firsts, axis=0)
    bottom = np.minimum.reduceat(U, batch.firsts, axis=0)
    centre, half = (top + bottom) / 2, (top - bottom) / 2
    whole_top, whole_bottom = top.max(axis=0), bottom.min(axis=0)
    c, h = (whole_top + whole_bottom) / 2, (whole_top - whole_bottom) / 2
    parent = np.array([np.concatenate([c, -h]), np.concatenate([-c, -h])]) @ p.draws.stacked
    out = []
    for j, side in enumerate(p.sides):
        z = side.z[batch.rows] + errors[j]
        Z = np.maximum.reduceat(z, batch.firsts) + SCREEN_MARGIN
        box = np.hstack([side.sign * centre, -half])
        bound = parent[0 if side.sign == 1 else 1]
        out.append(_leaves_side(p, side, batch, z, Z, box, bound, scratch))
    return out


def _leaves_side(
    p: Problem,
    side: Side,
    batch: _Batch,
    z: np.ndarray,
    Z: np.ndarray,
    box: np.ndarray,
    parent: np.ndarray,
    scratch: _Scratch,
) -> tuple[tuple[np.ndarray, np.ndarray, list[int]], np.ndarray]:
    """One side over a batch of leaves: the screen (the batch's bound ``parent``, then each
    leaf's ``box``), the kept values, the band selections; ((rows, statistics, columns), missed)."""
    G = p.Wt.shape[1]
    rows, sizes = batch.rows, batch.sizes
    nothing = (np.empty(0, dtype=np.intp), np.empty((0, len(side.depths))), side.columns)
    near_all = np.flatnonzero(parent <= Z.max())
    if near_all.size <= side.depths[-1]:
        return nothing, rows
    bound = box @ p.draws.stacked[:, near_all]  # (leaves, kept by the batch)
    keep = bound <= Z[:, None]
    counts = np.count_nonzero(keep, axis=1)
    # a dropped draw pads each leaf's columns: the batch's farthest, or the leaf's own
    filler = np.full(sizes.size, np.argmax(parent)) if near_all.size < G else None
    if filler is None:
        filler = near_all[np.argmax(bound, axis=1)]
        counts = np.where(counts < G, counts, 0)  # a leaf that keeps every draw goes whole
    fine = counts > side.depths[-1]
    if not fine.all():
        lost = rows[np.repeat(~fine, sizes)]
        if not fine.any():
            return nothing, lost
        kept = np.flatnonzero(fine)
        part, at = batch.subset(kept)
        done, more = _leaves_side(p, side, part, z[at], Z[kept], box[kept], parent, scratch)
        return done, np.concatenate([lost, more])
    width = counts + (-counts % COLUMN_MULTIPLE)
    if sizes @ width > scratch.limit and sizes.size > 1:  # the leaves in halves, one at a time
        got = []
        for half in np.array_split(np.arange(sizes.size), 2):
            part, at = batch.subset(half)
            got.append(_leaves_side(p, side, part, z[at], Z[half], box[half], parent, scratch))
        (rows_a, stats_a, _), lost_a = got[0]
        (rows_b, stats_b, _), lost_b = got[1]
        done = (np.concatenate([rows_a, rows_b]), np.concatenate([stats_a, stats_b]), side.columns)
        return done, np.concatenate([lost_a, lost_b])
    columns = np.repeat(filler, width)
    starts = np.concatenate([[0], np.cumsum(width)[:-1]])
    flat = np.flatnonzero(keep)
    slots = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    columns[slots + np.arange(flat.size)] = near_all[flat % near_all.size]
    Wk = np.take(p.Wt, columns, axis=1)
    row_width = np.repeat(width, sizes)
    values, flags = scratch.reserve(int(row_width.sum()))
    values = leaf_products(batch.Xt, Wk, sizes, width, values)
    row_start = np.concatenate([[0], np.cumsum(row_width)[:-1]])
    sd, mu = p.sd[rows], side.mu[rows]
    tau = tail_limit(mu, p.sigma[rows], p.slack[rows], np.repeat(Z, sizes))
    far = np.minimum(mu + (z + BAND_HALF) * sd, tau)
    near = mu + (z - BAND_HALF) * sd
    if side.depths[-1] - side.depths[0] > BAND_SPAN:
        near[:] = -np.inf
    s = side.sign
    got, ok, counted, _ = band_select(
        values, row_start, row_width, s * near, s * far, side.depths, s, flags, (sizes, width)
    )
    if not ok.all():
        # again: below the band when it started too deep, else between it and τ (every value up
        # to τ is there, none beyond it need be); then (−∞, τ]
        again = np.flatnonzero(~ok)
        deep = counted[again] > side.depths[0]
        lower = np.where(deep, mu[again] + (z[again] - 5 * BAND_HALF) * sd[again], far[again])
        upper = np.where(deep, np.minimum(near[again], tau[again]), tau[again])
        while again.size:
            sub, sub_start, sub_width = _subset(values, row_start, row_width, again)
            got[again], ok[again] = band_select(
                sub, sub_start, sub_width, s * lower, s * upper, side.depths, s, flags
            )[:2]
            if np.isneginf(lower).all():
                break
            again = again[~ok[again]]
            lower, upper = np.full(again.size, -np.inf), tau[again]
    return (rows[ok], got[ok], side.columns), rows[~ok]


def _subset(
    values: np.ndarray, starts: np.ndarray, widths: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows ``rows`` of a flat ragged layout, end to end in a new one: (values, starts, widths)."""
    w = widths[rows]
    new = np.concatenate([[0], np.cumsum(w)[:-1]])
    idx = np.repeat(starts[rows] - new, w) + np.arange(int(w.sum()))
    return values[idx], new, w


def tail_limit(mu: np.ndarray, sigma: np.ndarray, slack: np.ndarray, bound: float) -> np.ndarray:
    """τ = μ + σZ − slack, rounded down: every value whose screen bound exceeds Z lies above τ.

    A value x̃'w̃_g ≥ μ + σ·lower_g − slack, and lower_g > Z; the subtraction of 4u(|μ| + |σZ| +
    slack) covers the rounding of τ's own three operations.
    """
    sz = sigma * bound
    return mu + sz - slack - 4 * UNIT_ROUNDOFF * (np.abs(mu) + np.abs(sz) + slack)
