"""EM and ECME of the Bayesian SVM by sums over row partitions: the in-memory iterations, pass by pass.

An EM step (bayes-svm.md §4) needs of the rows only X̃'Λ⁻¹X̃ (k × k) and X̃'(1 + λ⁻¹) (k) at the
current β, and its safeguard and stopping rule only Σ max(r, 0) and the Huberised Σ (r + H_ε(r))/2;
the rest (the k × k solve, the Anderson extrapolation, ECME's ν step from the penalty sum S) is on
the driver. So one pass per iteration serves ``bayes_em._em_loop``'s step: it evaluates the EM
point g and the Anderson candidate together (objectives, sign flips, and the sums the next step
needs at each), and the driver keeps the one the safeguard keeps. When the ε continuation shrinks
ε, the sums of the kept point are taken again at the new ε (one extra pass, at most 8 per fit).

Exact finish (α ∈ {1, 2}, when ``_em_loop`` would try it): one pass gathers the rows with
|r_i| ≤ δ (δ from counts of |r_i| taken in the iteration's pass, so that about
``working_set_size`` rows come back) and the pull c = Σ x̃_i of the other rows with r_i > 0;
``certified_mode`` solves and certifies the reduced problem on those rows with the others held at
their sides; one more pass checks that every row left out keeps its side at the exact mode (with
the multipliers of the reduced certificate, that is the KKT condition on every row: the global
optimum) and returns the objective. Rows that broke their side come back in that same pass and join
the gathered set for another round; a finish that fails leaves EM to iterate on, as in memory.

ECME (bayes-svm.md §5) runs ``fit_ecme``'s loop: one pass per iteration, then its exact finish
(``bayes_ecme.joint_mode``), each exact mode at ν taken as above (a gather pass and a check pass,
after a counting pass from the second round on): both fits end at the same joint stationary point.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ..exceptions import BsvmValueError
from ..partitions import RowPartitions
from .bayes_ecme import ModeReply, cme_nu, ecme_value, joint_mode
from .bayes_em import (
    ANDERSON_MEMORY,
    FINISH_EVERY,
    FINISH_FLIPS,
    FINISH_START,
    FLOOR_START,
    RESIDUAL_FLOOR,
    EMResult,
    anderson_step,
    penalty_sum,
    prior_precision,
    relative_change,
    ridge_start,
    solve_m_step,
)
from .bayes_em_finish import WORKING_SET_ROUNDS, certified_mode, working_set_size
from .bayes_sums import (
    RESIDUAL_GRID,
    Design,
    Gather,
    Normal,
    PassCounter,
    Request,
    Sums,
    Verify,
    run_lockstep,
)

MAX_GATHER = 200_000
"""At most about this many rows are gathered for the finish (the in-memory set is 2 % of n)."""

ProgressFn = Callable[[float], None] | None
Solver = Generator[Request | list[Request], Any, Any]


def half_penalty(beta: np.ndarray, alpha: float, nu: float, penalised: np.ndarray) -> float:
    """ν^{-α} S / 2: the prior's share of d_α(β, 2^{1/α} ν); bayes-svm.md §1.1."""
    return 0.5 * nu ** (-alpha) * penalty_sum(beta, alpha, penalised)


def gather_radius(counts: np.ndarray, n: int, k: int) -> float:
    """δ such that about ``working_set_size(n, k)`` (≤ MAX_GATHER) rows have |r_i| ≤ δ."""
    target = min(working_set_size(n, k), MAX_GATHER)
    below = np.cumsum(counts)[: RESIDUAL_GRID.size]  # below[i] = #{|r| ≤ grid[i]}
    idx = int(np.searchsorted(below, target))
    if idx >= RESIDUAL_GRID.size:
        return np.inf if n <= 4 * MAX_GATHER else float(RESIDUAL_GRID[-1])
    if below[idx] > 4 * MAX_GATHER and idx > 0:
        idx -= 1
    return float(RESIDUAL_GRID[idx])


def gather_finish(
    t: int,
    n: int,
    beta: np.ndarray,
    counts: np.ndarray,
    alpha: float,
    nu: float,
    penalised: np.ndarray,
) -> Generator[Request, Any, tuple[np.ndarray, float] | None]:
    """(exact mode, Σ hinge there) certified on every row, or None (module docstring)."""
    delta = gather_radius(counts, n, beta.size)
    rows, pull = yield Gather(t, beta, delta)
    first = len(rows)
    exact_modes: list[np.ndarray] = []
    for _ in range(WORKING_SET_ROUNDS):
        exact = certified_mode(rows, beta, alpha, nu, penalised, offset=pull)
        if exact is None:
            return None
        if not np.isfinite(delta):  # every row was gathered: certified already
            return exact, float(np.maximum(1.0 - rows @ exact, 0.0).sum())
        exact_modes.append(exact)
        hinge, moved, moved_over = yield Verify(t, beta, delta, tuple(exact_modes))
        if len(moved) == 0:
            return exact, float(hinge)
        if len(moved) > first:
            return None
        rows = np.concatenate([rows, moved])
        pull = pull - moved[moved_over].sum(axis=0)
    return None


def em_by_sums(
    t: int,
    n: int,
    beta: np.ndarray,
    *,
    alpha: float,
    nu: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
    finish: bool = True,
    progress: ProgressFn = None,
) -> Solver:
    """``bayes_em._em_loop`` with every sum over rows asked of the partitions (module docstring)."""
    k = beta.size
    eps = max(FLOOR_START, RESIDUAL_FLOOR)
    can_finish = finish and alpha in (1.0, 2.0)
    hinge, _, _, counts, gram, rhs = yield Sums(t, beta, eps, counts=can_finish)
    f_old = hinge + half_penalty(beta, alpha, nu, penalised)
    history: list[tuple[np.ndarray, np.ndarray]] = []
    max_flips = FINISH_FLIPS * working_set_size(n, k)
    wait, next_finish = 1, 1
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        g = solve_m_step(gram, rhs, prior_precision(beta, alpha, nu, penalised))
        history = [*history[-ANDERSON_MEMORY:], (beta, g)]
        cand = anderson_step(history)
        points = [g] if cand is None else [g, cand]
        replies = yield [Sums(t, x, eps, previous=beta, counts=can_finish) for x in points]
        beta, reply = g, replies[0]
        if cand is not None:
            phi = reply[1] + half_penalty(g, alpha, nu, penalised)
            phi_cand = replies[1][1] + half_penalty(cand, alpha, nu, penalised)
            if phi_cand < phi:
                beta, reply = cand, replies[1]
            else:
                history = history[-1:]
        hinge, _, flips, counts, gram, rhs = reply
        f_new = hinge + half_penalty(beta, alpha, nu, penalised)
        change = relative_change(f_old, f_new)
        converged = change <= tol and eps <= RESIDUAL_FLOOR
        refresh = change <= 100.0 * tol and eps > RESIDUAL_FLOOR
        if refresh:
            eps = max(0.1 * eps, RESIDUAL_FLOOR)
            history = []
        f_old = f_new
        settled = change <= FINISH_START and flips <= max_flips and n_iter >= next_finish
        if can_finish and (converged or settled):
            found = yield from gather_finish(t, n, beta, counts, alpha, nu, penalised)
            if found is not None:
                exact, hinge_exact = found
                f_exact = hinge_exact + half_penalty(exact, alpha, nu, penalised)
                if f_exact <= f_new + 1e-12 * max(abs(f_new), 1.0):
                    return EMResult(exact, f_exact, n_iter, True, float(nu), polished=True)
            next_finish, wait = n_iter + wait, min(2 * wait, FINISH_EVERY)
        if converged:
            break
        if progress is not None:
            progress(n_iter / max_iter)
        if refresh:
            _, _, _, counts, gram, rhs = yield Sums(t, beta, eps, counts=can_finish)
    return EMResult(beta, f_old, n_iter, converged, float(nu))


def exact_mode_by_sums(
    t: int,
    n: int,
    beta: np.ndarray,
    nu: float,
    counts: np.ndarray | None,
    *,
    alpha: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
) -> Generator[Request, Any, ModeReply]:
    """``bayes_ecme.exact_mode`` by passes: the gathered finish at ν, else EM at ν from β."""
    if counts is None:
        _, _, _, counts, _, _ = yield Sums(t, beta, RESIDUAL_FLOOR, gram=False, counts=True)
    found = yield from gather_finish(t, n, beta, counts, alpha, nu, penalised)
    if found is None:
        res = yield from em_by_sums(t, n, beta, alpha=alpha, nu=nu, penalised=penalised, tol=tol,
                                    max_iter=max_iter)  # fmt: skip
        if not res.polished:
            return None
        found = res.beta, res.objective - half_penalty(res.beta, alpha, nu, penalised)
    return found


def ecme_by_sums(
    t: int,
    n: int,
    beta: np.ndarray,
    *,
    alpha: float,
    nu0: float,
    a_nu: float,
    b_nu: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
    progress: ProgressFn = None,
) -> Solver:
    """``bayes_ecme.fit_ecme``'s loop with the sums over rows asked of the partitions."""
    k = int(penalised.sum())
    opts = {"alpha": alpha, "a_nu": a_nu, "b_nu": b_nu, "penalised": penalised}
    nu = float(nu0)
    eps = max(FLOOR_START, RESIDUAL_FLOOR)
    can_finish = alpha in (1.0, 2.0)
    hinge, _, _, counts, gram, rhs = yield Sums(t, beta, eps, counts=can_finish)
    f_old = ecme_value(hinge, beta, nu, **opts)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        beta = solve_m_step(gram, rhs, prior_precision(beta, alpha, nu, penalised))
        hinge, _, _, counts, gram, rhs = yield Sums(t, beta, eps, counts=can_finish)
        nu = cme_nu(beta, alpha, k, a_nu, b_nu, penalised)
        f_new = ecme_value(hinge, beta, nu, **opts)
        change = abs(f_old - f_new) / max(abs(f_new), 1.0)
        converged = change <= tol and eps <= RESIDUAL_FLOOR
        refresh = False
        if change <= 100.0 * tol:
            new_eps = max(0.1 * eps, RESIDUAL_FLOOR)
            refresh, eps = new_eps != eps, new_eps
        f_old = f_new
        if converged:
            break
        if progress is not None:
            progress(n_iter / max_iter)
        if refresh:
            _, _, _, _, gram, rhs = yield Sums(t, beta, eps)
    if converged and can_finish:
        finish = joint_mode(beta, nu, alpha=alpha, a_nu=a_nu, b_nu=b_nu, penalised=penalised)
        found = None
        try:
            request = next(finish)
            while True:
                reply = yield from exact_mode_by_sums(
                    t, n, *request, counts, alpha=alpha, penalised=penalised, tol=tol,
                    max_iter=max_iter,
                )  # fmt: skip
                counts = None  # the counts were of the loop's last iterate
                request = finish.send(reply)
        except StopIteration as stop:
            found = stop.value
        if found is not None:
            beta, nu, hinge = found
            objective = hinge + half_penalty(beta, alpha, nu, penalised)
            return EMResult(beta, objective, n_iter, True, nu, polished=True)
    objective = float(hinge) + half_penalty(beta, alpha, nu, penalised)
    return EMResult(beta, objective, n_iter, converged, nu)


def mode_by_sums(
    t: int,
    n: int,
    k: int,
    method: str,
    beta0: np.ndarray | None,
    opts: dict[str, Any],
) -> Solver:
    """The ridge start (one pass, unless ``beta0``), then EM or ECME, for problem t."""
    penalised = opts["penalised"]
    if beta0 is None:
        gram, total = yield Normal(t)
        beta0 = ridge_start(gram, total, penalised)
    beta = np.array(beta0, dtype=np.float64)
    if method == "em":
        return (yield from em_by_sums(t, n, beta, **opts))
    return (yield from ecme_by_sums(t, n, beta, **opts))


def fit_modes_by_partitions(
    parts: RowPartitions,
    design: Design,
    method: str,
    *,
    alpha: float,
    nu: float,
    a_nu: float,
    b_nu: float,
    penalised: np.ndarray,
    tol: float,
    max_iter: int,
    beta0: list[np.ndarray] | None = None,
    progress: list[ProgressFn] | None = None,
    counter: PassCounter | None = None,
) -> list[EMResult]:
    """EM (``method="em"``) or ECME modes of every problem of ``design``, served in lockstep.

    Parameters
    ----------
    parts : RowPartitions
        The rows; ``design`` turns them into each problem's X̃ (k columns).
    alpha, nu, a_nu, b_nu, penalised, tol, max_iter
        As ``fit_em`` / ``fit_ecme`` (ν is ECME's start).
    beta0 : list of ndarray of shape (k,), optional
        EM starting points per problem (default: the ridge start, one pass).
    progress : list of callables, optional
        Per problem, called with iterations / max_iter after every iteration.
    counter : PassCounter, optional
        Incremented once per pass.

    Returns
    -------
    list of EMResult, one per problem.
    """
    n_problems = len(design.labels)
    k = int(penalised.size)
    k_pen = int(penalised.sum())
    if method == "ecme" and k_pen / alpha + a_nu <= 1.0:
        raise BsvmValueError(
            f"ECME needs k/alpha + a_nu > 1 for a finite nu; got k={k_pen}, alpha={alpha}, "
            f"a_nu={a_nu}."
        )
    opts: dict[str, Any] = {"alpha": alpha, "penalised": penalised, "tol": tol}
    opts["max_iter"] = max_iter
    if method == "em":
        opts["nu"] = nu
    else:
        opts.update(nu0=nu, a_nu=a_nu, b_nu=b_nu)
    solvers = [
        mode_by_sums(
            t, parts.n_rows, k, method,
            None if beta0 is None else beta0[t],
            {**opts, "progress": None if progress is None else progress[t]},
        )
        for t in range(n_problems)
    ]  # fmt: skip
    return run_lockstep(parts, design, solvers, counter or PassCounter())
