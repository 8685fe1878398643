"""What one pass over row partitions computes for the Bayesian SVM, and the lockstep driver.

A fit by partitions (``bayes_em_partitions``, ``bayes_gibbs_partitions``) is written as one
generator per binary problem: it yields the requests it needs answered over every row (a list of
them, or one) and is sent the answers. ``run_lockstep`` serves every problem's requests in one
pass (``map_sum`` when all are sums, ``map_gather`` when some rows must come back), so K
one-vs-rest problems and C chains cost the passes of one.

On a partition, the rows of problem t are x̃_i = y_i (1, z_i) (or y_i z_i without intercept), with
z = (x / power − mean) / scale and y_i = +1 for the problem's label, −1 otherwise (one-vs-one: −1
for the pair's other label, rows of other classes left out): exactly the rows ``BayesianSVM.fit``
builds in memory.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..partitions import RowPartitions, sum_results
from ..random_variates import wald_inverse_mean
from .bayes_em_finish import KKT_TOL

RESIDUAL_GRID = np.geomspace(1e-9, 1e3, 49)
"""Thresholds at which Sums counts |r_i| ≤ t: the driver picks the finish's gather radius."""


@dataclass(frozen=True)
class Design:
    """How a partition's raw (X, y) become the rows x̃ of every binary problem."""

    power: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    intercept: bool
    labels: tuple[Any, ...]
    """The positive label of each problem (one-vs-rest: every class; two classes: classes_[1])."""
    versus: tuple[Any, ...] | None = None
    """One-vs-one: the negative label of each problem (rows of other labels are not its rows);
    None: every row without the positive label is negative."""

    def rows(self, X: np.ndarray, y: np.ndarray, problems: list[int]) -> list[np.ndarray]:
        """X̃ of the given problems on this partition."""
        Z = (X / self.power - self.mean) / self.scale
        if self.intercept:
            Z = np.column_stack([np.ones(Z.shape[0]), Z])
        out = []
        for t in problems:
            positive = y == self.labels[t]
            if self.versus is None:
                out.append(np.where(positive, 1.0, -1.0)[:, None] * Z)
            else:
                pair = positive | (y == self.versus[t])
                out.append(np.where(positive[pair], 1.0, -1.0)[:, None] * Z[pair])
        return out


@dataclass(frozen=True)
class Normal:
    """(X̃'X̃, X̃'1): the ridge start of EM and the λ⁻¹ = 1 start of Gibbs."""

    problem: int


@dataclass(frozen=True)
class Sums:
    """At β: Σ max(r, 0), Σ (r + H_ε(r))/2 (bayes_em.huberised_objective), sign flips against
    ``previous``, and (if ``gram``) X̃'ΛX̃ and X̃'(1 + λ⁻¹), λ_i⁻¹ = 1/max(|r_i|, ε); P & S §3-4."""

    problem: int
    beta: np.ndarray
    eps: float
    previous: np.ndarray | None = None
    gram: bool = True
    counts: bool = False


@dataclass(frozen=True)
class Gather:
    """Rows with |r_i| ≤ δ at β, and Σ x̃_i over the others with r_i > 0 (their linear pull)."""

    problem: int
    beta: np.ndarray
    delta: float


@dataclass(frozen=True)
class Verify:
    """Σ max(r, 0) at ``exact[-1]``, and the rows outside the gathered set (|r_i| > δ at
    ``beta``) whose side at ``exact[-1]`` breaks their side at ``beta``, less those that broke it
    at an earlier ``exact`` (already added to the gathered set)."""

    problem: int
    beta: np.ndarray
    delta: float
    exact: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Latent:
    """Per chain c: λ_i⁻¹ | β_c ~ IG(1/|r_i|, 1) (P & S eq. 6, §3.2) from the stream
    ``default_rng([seed, 1, problem, c, sweep, p])``, returned as X̃'Λ⁻¹X̃ (C, k, k) and
    X̃'(1 + λ⁻¹) (C, k): what β | λ needs (§3.1)."""

    problem: int
    betas: np.ndarray
    seed: int
    sweep: int


Request = Normal | Sums | Gather | Verify | Latent
GATHERS = (Gather, Verify)


def side_breaks(r_from: np.ndarray, r_to: np.ndarray) -> np.ndarray:
    """Rows whose side at r_from (> 0: in the hinge) is broken at r_to beyond KKT_TOL."""
    return np.where(r_from > 0.0, r_to < -KKT_TOL, r_to > KKT_TOL)


def answer(Xt: np.ndarray, request: Request, p: int) -> Any:
    """One request on one partition's rows X̃ of the request's problem."""
    if isinstance(request, Normal):
        return Xt.T @ Xt, Xt.sum(axis=0)
    if isinstance(request, Latent):
        k = Xt.shape[1]
        grams, rhos = np.empty((len(request.betas), k, k)), np.empty((len(request.betas), k))
        for c, beta in enumerate(request.betas):
            rng = np.random.default_rng([request.seed, 1, request.problem, c, request.sweep, p])
            lam_inv = wald_inverse_mean(np.abs(1.0 - Xt @ beta), 1.0, rng)
            root = Xt * np.sqrt(lam_inv)[:, None]
            grams[c], rhos[c] = root.T @ root, Xt.T @ (1.0 + lam_inv)
        return grams, rhos
    r = 1.0 - Xt @ request.beta
    if isinstance(request, Sums):
        a = np.abs(r)
        eps = request.eps
        huber = np.where(a < eps, 0.5 * (a * a / eps + eps), a)
        flips = None
        if request.previous is not None:
            flips = np.count_nonzero((1.0 - Xt @ request.previous > 0.0) != (r > 0.0))
        counts = None
        if request.counts:
            counts = np.bincount(
                np.searchsorted(RESIDUAL_GRID, a), minlength=RESIDUAL_GRID.size + 1
            )
        gram = rhs = None
        if request.gram:
            w = 1.0 / np.maximum(a, eps)
            B = Xt * np.sqrt(w)[:, None]
            gram, rhs = B.T @ B, Xt.T @ (1.0 + w)
        return np.maximum(r, 0.0).sum(), 0.5 * np.sum(r + huber), flips, counts, gram, rhs
    near = np.abs(r) <= request.delta
    if isinstance(request, Gather):
        return Xt[near], Xt.T @ (~near & (r > 0.0)).astype(np.float64)
    r_exact = [1.0 - Xt @ b for b in request.exact]
    earlier = np.zeros(len(r), dtype=bool)
    for r_old in r_exact[:-1]:
        earlier |= side_breaks(r, r_old)
    moved = ~near & ~earlier & side_breaks(r, r_exact[-1])
    return np.maximum(r_exact[-1], 0.0).sum(), Xt[moved], r[moved] > 0.0


def answer_all(
    X: np.ndarray, y: np.ndarray, p: int, design: Design, requests: list[Request]
) -> list[Any]:
    """Every request of a pass on partition p (module-level: it is pickled to Dask workers)."""
    needed = sorted({req.problem for req in requests})
    rows = dict(zip(needed, design.rows(X, y, needed), strict=True))
    return [answer(rows[req.problem], req, p) for req in requests]


def combine_gathered(parts_answers: list[Any], request: Request) -> Any:
    """One request's answers from every partition, rows concatenated and sums added."""
    if isinstance(request, Gather):
        return np.concatenate([a[0] for a in parts_answers]), sum_results(
            [a[1] for a in parts_answers]
        )
    hinge = sum_results([a[0] for a in parts_answers])
    return (
        hinge,
        np.concatenate([a[1] for a in parts_answers]),
        np.concatenate([a[2] for a in parts_answers]),
    )


Solver = Generator[Request | list[Request], Any, Any]


class PassCounter:
    """Passes made over the partitions by ``run_lockstep``."""

    def __init__(self) -> None:
        self.passes = 0


def run_lockstep(
    parts: RowPartitions, design: Design, solvers: list[Solver], counter: PassCounter
) -> list[Any]:
    """Drive every solver to its return value, serving all their pending requests in one pass."""
    results: list[Any] = [None] * len(solvers)
    pending = {t: next(s) for t, s in enumerate(solvers)}
    while pending:
        flat: list[Request] = []
        shapes: dict[int, int | None] = {}
        for t, req in pending.items():
            many = isinstance(req, list)
            shapes[t] = len(req) if many else None
            flat.extend(req if many else [req])
        counter.passes += 1
        if any(isinstance(req, GATHERS) for req in flat):
            per_part = parts.map_gather(answer_all, design, flat)
            answers = [
                combine_gathered([pa[i] for pa in per_part], req)
                if isinstance(req, GATHERS)
                else sum_results([pa[i] for pa in per_part])
                for i, req in enumerate(flat)
            ]
        else:
            answers = parts.map_sum(answer_all, design, flat)
        i = 0
        for t in list(pending):
            size = shapes[t]
            reply = answers[i] if size is None else answers[i : i + size]
            i += 1 if size is None else size
            try:
                pending[t] = solvers[t].send(reply)
            except StopIteration as stop:
                results[t] = stop.value
                del pending[t]
    return results
