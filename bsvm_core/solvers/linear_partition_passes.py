"""What one pass of the partitioned exact linear SVM computes on one partition (run where it lives).

Each function here is called by ``RowPartitions.map_sum``/``map_gather`` as ``fn(X_p, y_p, p, ...)``
on a worker, for every binary problem of the fit at once (``linear_partitioned`` is the driver
that sends the models and reads back these sums and rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..multiclass import REST
from .linear_exact import BAND

T_GRID = np.array([1.0] + [2.0**-k for k in range(1, 13)] + [0.0])
"""Step lengths whose F_μ a Newton pass evaluates along the direction (t = 1 first, t = 0 last)."""
T_SUMS = (1.0, 0.5, 0.25)
"""Step lengths (the first ones of T_GRID) at which a pass also sums the gradient and Hessian."""
BAND_WIDTHS = 2.0 ** -np.arange(4)
"""Band widths δ/μ whose row counts a Newton pass returns."""


def problem_rows(
    X: np.ndarray, y_idx: np.ndarray, problem: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, ±1 targets) of one binary problem in a block (one-vs-one keeps its two classes)."""
    pos, neg = problem
    if neg == REST:
        return X, np.where(y_idx == pos, 1.0, -1.0)
    mask = (y_idx == pos) | (y_idx == neg)
    return X[mask], np.where(y_idx[mask] == pos, 1.0, -1.0)


def encode_labels(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Class indices of a block's labels (every label is one of ``classes``)."""
    return np.searchsorted(classes, y)


def huber_hinge(z: np.ndarray, mu: float) -> np.ndarray:
    """h_μ(z) = 0 (z ≤ 0), z²/(2μ) (0 < z < μ), z − μ/2 (z ≥ μ); Chapelle (2007) §4."""
    return np.where(z >= mu, z - 0.5 * mu, np.where(z > 0.0, z * z / (2.0 * mu), 0.0))


def newton_sums(
    X: np.ndarray, y: np.ndarray, z: np.ndarray, mu: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """(Σ y_i h'_μ(z_i)(x_i, 1), Σ_quad (x_i, 1)(x_i, 1)', band sizes): F_μ's gradient and Hessian sums.

    The band sizes count the rows with −BAND δ < z < (1 + BAND) δ for δ = μ, μ/2, ..., μ/2^(k−1),
    k = len(BAND_WIDTHS): the band gathered is the widest that fits in BAND_ROWS.
    """
    d = X.shape[1]
    yf = y * np.clip(z / mu, 0.0, 1.0)
    g = np.empty(d + 1)
    g[:d] = X.T @ yf
    g[d] = yf.sum()
    Xq = X[(z > 0.0) & (z < mu)]
    H = np.empty((d + 1, d + 1))
    H[:d, :d] = Xq.T @ Xq
    H[:d, d] = H[d, :d] = Xq.sum(axis=0)
    H[d, d] = Xq.shape[0]
    widths = mu * BAND_WIDTHS
    band = ((z[:, None] > -BAND * widths) & (z[:, None] < (1.0 + BAND) * widths)).sum(axis=0)
    return g, H, band


def pieces(z: np.ndarray, mu: float) -> np.ndarray:
    """Piece of h_μ each residual lies in: 0 flat, 1 quadratic, 2 linear."""
    return (z > 0.0).astype(np.int8) + (z >= mu)


def sample_block(
    X: np.ndarray, y: np.ndarray, p: int, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, bool, np.ndarray, np.ndarray]:
    """(labels, counts, max |x|, finite, sample X, sample y): the first pass over a block."""
    labels, counts = np.unique(y, return_counts=True)
    finite = bool(np.isfinite(X).all())
    max_abs = max(float(X.max(initial=0.0)), -float(X.min(initial=0.0))) if finite else np.inf
    take = np.random.default_rng([seed, p]).random(X.shape[0]) < fraction
    return labels, counts, max_abs, finite, X[take], y[take]


def split_rows(z0: np.ndarray, z1: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """(near, beyond) along z(t) = (1 − t) z0 + t z1, t ∈ [0, 1]: near meets −BAND μ < z < (1 + BAND) μ
    for some t, beyond has z(t) ≥ (1 + BAND) μ for every t (h_μ(z) = z − μ/2 there, h' = 1)."""
    lo = np.minimum(z0, z1)
    beyond = lo >= (1.0 + BAND) * mu
    near = ~beyond & (np.maximum(z0, z1) > -BAND * mu)
    return near, beyond


def beyond_sums(
    X: np.ndarray, y: np.ndarray, z0: np.ndarray, dm: np.ndarray, beyond: np.ndarray, mu: float
) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_beyond h_μ(z0 − t dm) for t in T_GRID, Σ_beyond y_i (x_i, 1)): h_μ(z) = z − μ/2 there."""
    y_b = np.where(beyond, y, 0.0)
    g = np.append(X.T @ y_b, y_b.sum())
    h = np.where(beyond, z0, 0.0).sum() - T_GRID * np.where(beyond, dm, 0.0).sum()
    return h - 0.5 * mu * np.count_nonzero(beyond), g


def newton_block(
    X: np.ndarray,
    y: np.ndarray,
    p: int,
    classes: np.ndarray,
    problems: list[tuple[int, int]],
    states: list[tuple[int, np.ndarray, float, np.ndarray, float, float]],
) -> list[tuple[Any, ...]]:
    """Per state (problem, w, b, dw, db, μ): Σ h_μ along T_GRID, rows changing piece between t = 0
    and 1, ``newton_sums`` at each t of T_SUMS, and at t = 1 for μ/10.

    Only the rows near the band along the step (``split_rows``) are evaluated row by row; the rows
    beyond it (linear piece all along) enter through closed-form sums, the rows below it not at
    all (flat piece, outside every band): the same sums, in a fraction of the work.
    """
    y_idx = encode_labels(y, classes)
    out = []
    for j, w, b, dw, db, mu in states:
        Xj, yj = problem_rows(X, y_idx, problems[j])
        z0 = 1.0 - yj * (Xj @ w + b)
        dm = yj * (Xj @ dw + db)
        near, beyond = split_rows(z0, z0 - dm, mu)
        h_far, g_far = beyond_sums(Xj, yj, z0, dm, beyond, mu)
        Xn, yn, z0n, dmn = Xj[near], yj[near], z0[near], dm[near]
        h = h_far + huber_hinge(z0n[:, None] - dmn[:, None] * T_GRID[None, :], mu).sum(axis=0)
        changed = int(np.count_nonzero(pieces(z0n, mu) != pieces(z0n - dmn, mu)))
        sums = [with_gradient(newton_sums(Xn, yn, z0n - t * dmn, mu), g_far) for t in T_SUMS]
        mu_next = with_gradient(newton_sums(Xn, yn, z0n - dmn, 0.1 * mu), g_far)
        out.append((h, changed, sums, mu_next))
    return out


def with_gradient(
    sums: tuple[np.ndarray, np.ndarray, np.ndarray], g: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``newton_sums`` with the gradient sum of other rows added: (g_sum + g, H_sum, band sizes)."""
    return sums[0] + g, sums[1], sums[2]


@dataclass
class HeldRows:
    """Which rows of a problem sit in its band and which are held at α = C, rebuilt on a block.

    The band is −BAND δ < z < (1 + BAND) δ at the gathered (w, b) and width δ (for the hard margin it
    starts empty: the sample's rows are the driver's), then each check round's crossings
    (w_r, b_r, lo_r, hi_r) join it.
    """

    w: np.ndarray
    b: float
    mu: float
    hard: bool = False
    rounds: list[tuple[np.ndarray, float, float, float]] = field(default_factory=list)

    def masks(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(in band, held at α = C) for the rows X, y of one block."""
        z = 1.0 - y * (X @ self.w + self.b)
        if self.hard:
            band, at_c = np.zeros(z.shape, dtype=bool), np.zeros(z.shape, dtype=bool)
        else:
            band = (z > -BAND * self.mu) & (z < (1.0 + BAND) * self.mu)
            at_c = z >= (1.0 + BAND) * self.mu
        for w, b, lo, hi in self.rounds:
            band |= crossed(1.0 - y * (X @ w + b), band, at_c, lo, hi)
            at_c &= ~band
        return band, at_c


def crossed(z: np.ndarray, band: np.ndarray, at_c: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Held rows that break their KKT condition: α = C needs z ≥ lo, α = 0 needs z ≤ hi."""
    return ~band & np.where(at_c, z < lo, z > hi)


def band_block(
    X: np.ndarray,
    y: np.ndarray,
    p: int,
    classes: np.ndarray,
    problems: list[tuple[int, int]],
    states: list[tuple[int, HeldRows]],
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per state: the band's rows, their ±1 targets, and ``held_sum`` over rows held at α = C."""
    y_idx = encode_labels(y, classes)
    out = []
    for j, held in states:
        Xj, yj = problem_rows(X, y_idx, problems[j])
        band, at_c = held.masks(Xj, yj)
        out.append((Xj[band], yj[band], held_sum(Xj, yj, at_c)))
    return out


def held_sum(X: np.ndarray, y: np.ndarray, at_c: np.ndarray) -> np.ndarray:
    """(Σ y_i (x_i, 1), their number) over the rows held at α = C: d + 2 entries."""
    y_c = np.where(at_c, y, 0.0)
    return np.append(X.T @ y_c, [y_c.sum(), np.count_nonzero(at_c)])


def check_block(
    X: np.ndarray,
    y: np.ndarray,
    p: int,
    classes: np.ndarray,
    problems: list[tuple[int, int]],
    states: list[tuple[int, HeldRows, np.ndarray, float, tuple[float, float], int]],
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, float]]:
    """Per state (problem, held, w, b, (lo, hi), cap): crossed rows and targets, held sum, Σ (z)₊."""
    y_idx = encode_labels(y, classes)
    out = []
    for j, held, w, b, (lo, hi), cap in states:
        Xj, yj = problem_rows(X, y_idx, problems[j])
        band, at_c = held.masks(Xj, yj)
        z = 1.0 - yj * (Xj @ w + b)
        cross = np.flatnonzero(crossed(z, band, at_c, lo, hi))
        if cross.size > cap:  # the worst violators only (hard margin)
            cross = cross[np.argpartition(-z[cross], cap - 1)[:cap]]
        keep = at_c.copy()
        keep[cross] = False
        out.append((Xj[cross], yj[cross], held_sum(Xj, yj, keep), float(np.maximum(z, 0.0).sum())))
    return out
