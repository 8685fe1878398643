"""Where each row's tail statistics are expected, for ``screened_quantiles``' screen.

A problem's ``Side``s are its tails, each as the lower tail of sign · x̃'w̃_g, with every row's
signed mean and guide position (exact moments and Cornish-Fisher positions,
``draw_quantiles.tail_guide``). A pilot row per batch of leaves corrects the guide: the median of
its and its neighbours' errors (``PILOT_WINDOW``) is the batch's correction e, and a row's
statistic is then expected at z = guide + e SDs from its mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import draw_quantiles as dq
from .draw_screen import WhiteDraws, row_axes, whiten_draws

PILOT_MARGIN = 0.3
"""SDs past the guide's position up to which a pilot row's values are selected among."""

PILOT_WINDOW = 3
"""A batch's correction is the median of the errors of this many pilots: its own (its middle row)
and its neighbours' in k-d order."""


@dataclass(frozen=True)
class Side:
    """One tail of a problem as the lower tail of sign · x̃'w̃_g: the rows' signed means and guide
    positions, the depths needed and where they go."""

    sign: int
    mu: np.ndarray  # sign · x̃'w̄, (n,)
    z: np.ndarray  # guide position of the deepest statistic, in SDs from mu, (n,)
    depths: list[int]  # ascending; 0 the smallest of sign · values
    columns: list[int]  # the statistics' columns in the problem's output, as depths


@dataclass(frozen=True)
class Problem:
    """One projection problem's rows, draws, ranks, and per-row screen quantities."""

    Xt: np.ndarray
    Wt: np.ndarray
    draws: WhiteDraws
    ranks: list[int]
    sd: np.ndarray
    unit: np.ndarray
    sigma: np.ndarray
    slack: np.ndarray
    sides: list[Side]
    step: int  # rows whose every value is computed at once


def pilot_row(leaves: list[np.ndarray]) -> int:
    """The middle row of the leaves' rows (k-d order)."""
    rows = np.concatenate(leaves)
    return int(rows[rows.size // 2])


def median_errors(errors: np.ndarray) -> np.ndarray:
    """(sides, batches): for each batch, the median of the finite errors among the pilots of the
    ``PILOT_WINDOW`` batches around it (0 if none is finite)."""
    reach = PILOT_WINDOW // 2
    padded = np.pad(errors, ((0, 0), (reach, reach)), mode="edge")
    grouped = np.stack([padded[:, i : i + errors.shape[1]] for i in range(2 * reach + 1)], axis=2)
    finite = np.isfinite(grouped)
    ordered = np.sort(np.where(finite, grouped, np.inf), axis=2)
    count = finite.sum(axis=2, keepdims=True)
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=2)
    high = np.take_along_axis(ordered, np.minimum(count // 2, grouped.shape[2] - 1), axis=2)
    return np.where(count > 0, (low + high) / 2, 0.0)[..., 0]


def problem_axes(
    Xt: np.ndarray, Wt: np.ndarray, moments: tuple[np.ndarray, ...]
) -> tuple[WhiteDraws, np.ndarray, tuple[np.ndarray, np.ndarray], np.ndarray] | None:
    """(whitened draws, row axes ŷ, (σ, slack), rows the screen can bound); None without spread."""
    draws = whiten_draws(Wt, moments[0], moments[1])
    if draws is None:
        return None
    unit, sigma, slack = row_axes(Xt, draws)
    return draws, unit, (sigma, slack), (sigma > 0) & np.isfinite(slack)


def new_problem(
    Xt: np.ndarray,
    Wt: np.ndarray,
    moments: tuple[np.ndarray, ...],
    axes: tuple[WhiteDraws, np.ndarray, tuple[np.ndarray, np.ndarray], np.ndarray] | None,
    ranks: list[int],
    step: int,
) -> Problem:
    """The problem's guide and signed tails (``ranks`` in the outer quarters) on its ``axes``.

    A row whose guide is not finite gets the position −∞: its band is empty, and it goes through
    the screen's limit τ alone (or whole).
    """
    assert axes is not None
    draws, unit, (sigma, slack), _ = axes
    G = Wt.shape[1]
    tails = dq._tails(ranks, G)
    assert tails is not None
    mu, sd, z_lo, z_hi = guide_positions(Xt, moments, tails, G)
    sides = []
    low = [i for i, r in enumerate(ranks) if r < tails[0]]
    high = [i for i, r in enumerate(ranks) if r >= tails[0]]
    with np.errstate(invalid="ignore"):
        if low:
            z = np.where(np.isfinite(z_lo) & np.isfinite(mu) & np.isfinite(sd), z_lo, -np.inf)
            sides.append(Side(1, mu, z, [ranks[i] for i in low], low))
        if high:
            z = np.where(np.isfinite(z_hi) & np.isfinite(mu) & np.isfinite(sd), -z_hi, -np.inf)
            depths = [G - 1 - ranks[i] for i in reversed(high)]
            sides.append(Side(-1, -mu, z, depths, high[::-1]))
    return Problem(Xt, Wt, draws, ranks, sd, unit, sigma, slack, sides, step)


def guide_positions(
    Xt: np.ndarray, moments: tuple[np.ndarray, ...], tails: tuple[int, int], G: int
) -> np.ndarray:
    """(4, n): each row's mean, SD and guide positions, ``GUIDE_ROWS`` rows at a time."""
    out = np.empty((4, Xt.shape[0]))
    for start in range(0, Xt.shape[0], dq.GUIDE_ROWS):
        rows = slice(start, start + dq.GUIDE_ROWS)
        out[:, rows] = dq.tail_guide(Xt[rows], moments, tails, G)
    return out


def pilot_errors(p: Problem, pilots: np.ndarray) -> np.ndarray:
    """(sides, pilots): each pilot row's deepest statistic minus its guide position, in SDs
    (NaN where not finite): selected among the row's values up to ``PILOT_MARGIN`` SDs past the
    guide (among all of them where too few lie there)."""
    F = p.Xt[pilots] @ p.Wt
    out = np.empty((len(p.sides), pilots.size))
    for j, side in enumerate(p.sides):
        values = side.sign * F
        mu, sd, z, d = side.mu[pilots], p.sd[pilots], side.z[pilots], side.depths[-1]
        with np.errstate(invalid="ignore", over="ignore"):
            limit = mu + (z + PILOT_MARGIN) * sd
        gap = np.nextafter(limit, np.inf)
        deepest = np.partition(dq._pack(values, values <= limit[:, None], gap, d + 1), d, axis=1)[
            :, d
        ]
        short = ~(deepest <= limit)
        if short.any():
            deepest[short] = np.partition(values[short], d, axis=1)[:, d]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out[j] = (deepest - mu) / sd - z
    return out
