"""Certified finish of the EM mode for α ∈ {1, 2}: the exact optimum read off an EM iterate.

bayes-svm.md §4, option 2. Once EM is close, the side of every point (r_i = 1 − x̃_i'β > 0: in the
hinge, < 0: beyond the margin) is known for all but a few points near the margin, and the mode
solves a finite problem. A finish returns β only if it passes the KKT conditions of the convex
objective on every point, which certifies the global optimum; otherwise None, and EM carries on.

1. *Working set* (`working_set_finish`). W holds the m smallest |r_i|. Every other point keeps the
   side of its EM residual, so its hinge term is linear: the points with r_i > 0 add −c'β,
   c = Σ x̃_i. Since max(r, 0) ≥ r and ≥ 0, the reduced objective is below the full one everywhere
   and equal to it wherever those sides hold: its exact minimiser is the mode if no point outside W
   changed side. Points that did join W, and the reduced problem is solved again.
2. *Reduced problem, solved exactly.*

   * α = 2 (λ = ν^{-2}): the QP min 1'ξ − c'β + ½β'Λβ s.t. Aβ + ξ − t = 1, ξ, t ≥ 0 (A = X̃_W,
     Λ = diag(λ · penalised)) by a Mehrotra predictor-corrector interior point (Ferris & Munson,
     SIAM J. Optim. 2002, for the linear SVM). Its Newton step eliminates, per point, the 2×2
     system in (Δa, Δξ) with det_i = t_i z_i + a_i ξ_i, leaving the k×k system
     (Λ + A' diag(a z / det) A) Δβ = −r_d + A'e: an EM-sized weighted Gram of W. Crossover: the
     points with t_i < a_i and ξ_i < z_i lie on the margin (set E), and the face system
     [Λ, −X̃_E'; X̃_E, 0][β; a_E] = [c_all; 1] gives β exactly. KKT: Λβ = Σ a_i x̃_i with
     a_i = 1 if r_i > 0, 0 if r_i < 0 and a_i ∈ [0, 1] on the margin.
   * α = 1: the dual LP of the reduced problem by HiGHS' dual simplex, then the vertex with as many
     margin points as free coefficients read off its solution, its dual checked (multipliers in
     [0, 2], subgradients of the zero coefficients in [−1, 1]). The vertex is tried on the EM
     iterate itself first, which costs one pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.optimize

KKT_TOL = 1e-9
"""Slack allowed in the KKT certificate (multiplier bounds, residual signs)."""

WORKING_SET_PER_COEF = 20
"""The first working set holds at least this many points per coefficient (or all points) ..."""

WORKING_SET_FRACTION = 0.02
"""... and at least this fraction of the points."""

WORKING_SET_ROUNDS = 4
"""Cap on the rounds that move points whose side changed into the working set."""

IPM_MAX_ITER = 50
"""Cap on the interior-point iterations (converged reduced problems need 15-40)."""

IPM_GAP = 1e-10
"""Relative complementarity gap at which the interior point hands over to the crossover."""

STEP_BACK = 0.995
"""Fraction of the step to the boundary taken by the interior point."""

LASSO_THRESHOLDS = (1e-3, 1e-5, 1e-7)
"""Residual and coefficient thresholds tried when reading the α = 1 vertex off EM."""


def ridge_face(
    Xt: np.ndarray, on: np.ndarray, c: np.ndarray, lam: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Solve Λβ = c + X̃_E'a_E, X̃_E β = 1 (E = ``on``) with a_E ∈ [0, 1]: one partition's KKT, α = 2.

    a_E is not unique when E is degenerate (more margin points than its rank, e.g. tied rows); the
    minimum-norm a_E may then leave [0, 1], and bounded multipliers are sought by BVLS instead.
    None if the system is inconsistent or no multipliers in [0, 1] exist.
    """
    E = Xt[on]
    m, k = E.shape
    K = np.zeros((k + m, k + m))
    K[np.arange(k), np.arange(k)] = lam
    K[:k, k:] = -E.T
    K[k:, :k] = E
    rhs = np.concatenate([c, np.ones(m)])
    sol, _, rank, _ = scipy.linalg.lstsq(K, rhs, check_finite=False, lapack_driver="gelsy")
    if not np.all(np.isfinite(sol)) or not np.allclose(K @ sol, rhs, rtol=0.0, atol=KKT_TOL):
        return None
    beta, a = sol[:k], sol[k:]
    if rank < k + m and (a.min(initial=0.0) < -KKT_TOL or a.max(initial=0.0) > 1.0 + KKT_TOL):
        target = lam * beta - c
        a = scipy.optimize.lsq_linear(E.T, target, bounds=(0.0, 1.0), method="bvls").x
        scale = 1.0 + float(np.abs(c).max(initial=0.0))
        if np.abs(E.T @ a - target).max(initial=0.0) > KKT_TOL * scale:
            return None
    return beta, a


def _newton_step(
    A: np.ndarray, chol: tuple[np.ndarray, bool], state: tuple[np.ndarray, ...], res: tuple
) -> tuple[np.ndarray, ...]:
    """Newton direction of the reduced QP: per-point 2×2 elimination, then the k×k Gram solve."""
    xi, t, a, z = state
    r_d, r_z, r_p, r_t, r_xi = res
    det = t * z + a * xi
    e = (a * r_xi + a * xi * r_z - z * r_t - a * z * r_p) / det
    d_beta = scipy.linalg.cho_solve(chol, A.T @ e - r_d, check_finite=False)
    v = A @ d_beta
    d_a = e - (a * z / det) * v
    d_xi = -(t * r_xi + t * xi * r_z + xi * r_t + a * xi * (v + r_p)) / det
    return d_beta, d_xi, d_xi + v + r_p, d_a, r_z - d_a


def _step_to_boundary(state: tuple[np.ndarray, ...], step: tuple[np.ndarray, ...]) -> float:
    """Largest s ≤ 1 keeping ξ, t, a, z ≥ 0 along the step."""
    s = 1.0
    for x, dx in zip(state, step, strict=True):
        neg = dx < 0.0
        if neg.any():
            s = min(s, float(np.min(-x[neg] / dx[neg])))
    return s


def interior_point(
    A: np.ndarray, c: np.ndarray, lam: np.ndarray, beta: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """min Σ max(1 − Aβ, 0) − c'β + ½β'Λβ by Mehrotra predictor-corrector; (β, a, on) or None.

    ``a`` are the hinge multipliers and ``on`` flags the points read as lying on the margin.
    """
    m = A.shape[0]
    r = 1.0 - A @ beta
    xi = np.maximum(r, 0.0) + 1.0
    t = xi - r
    a = np.full(m, 0.5)
    z = np.full(m, 0.5)
    scale = 1.0 + float(np.abs(c).max(initial=0.0))
    for _ in range(IPM_MAX_ITER):
        r_d = lam * beta - A.T @ a - c
        r_z = 1.0 - a - z
        r_p = A @ beta + xi - t - 1.0
        gap = a @ t + z @ xi
        primal = xi.sum() - c @ beta + 0.5 * beta @ (lam * beta)
        if (
            gap <= IPM_GAP * max(1.0, abs(primal))
            and np.abs(r_d).max() <= 1e-7 * scale
            and np.abs(r_p).max() <= KKT_TOL
            and np.abs(r_z).max() <= KKT_TOL
        ):
            return beta, a, (t < a) & (xi < z)
        B = A * np.sqrt(a * z / (t * z + a * xi))[:, None]
        M = B.T @ B
        M[np.diag_indices_from(M)] += lam
        try:
            chol = scipy.linalg.cho_factor(M, check_finite=False)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            return None
        state = (xi, t, a, z)
        aff = _newton_step(A, chol, state, (r_d, r_z, r_p, a * t, z * xi))
        s = _step_to_boundary(state, aff[1:])
        _, d_xi, d_t, d_a, d_z = aff
        mu = gap / (2 * m)
        mu_aff = ((a + s * d_a) @ (t + s * d_t) + (z + s * d_z) @ (xi + s * d_xi)) / (2 * m)
        target = (mu_aff / mu) ** 3 * mu
        corr = (r_d, r_z, r_p, a * t + d_a * d_t - target, z * xi + d_z * d_xi - target)
        d_beta, d_xi, d_t, d_a, d_z = _newton_step(A, chol, state, corr)
        s = min(1.0, STEP_BACK * _step_to_boundary(state, (d_xi, d_t, d_a, d_z)))
        beta = beta + s * d_beta
        xi, t, a, z = xi + s * d_xi, t + s * d_t, a + s * d_a, z + s * d_z
    return None


def working_set_size(n: int, k: int) -> int:
    """Points in the first working set: the m smallest |r_i|, m = max(20k, 2% n), at most n."""
    return min(n, max(WORKING_SET_PER_COEF * k, int(WORKING_SET_FRACTION * n)))


ReducedSolve = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    tuple[np.ndarray, np.ndarray | None] | None,
]
"""(idx, over, c, β) ↦ (β_W, certified β or None), or None: one exact solve on the working set."""


def working_set_finish(
    Xt: np.ndarray, beta: np.ndarray, solve: ReducedSolve, offset: np.ndarray | None = None
) -> np.ndarray | None:
    """Certified mode by a growing working set W around the EM iterate (module docstring, step 1).

    Points outside W keep the side of their EM residual: ``over`` (r_i > 0) contributes the linear
    term c = Σ_over x̃_i (plus ``offset``: the pull of rows not in ``Xt`` held in the hinge). ``solve`` minimises the reduced objective exactly and certifies its result
    on all points; if it cannot, the points outside W whose side changed join W, at most
    WORKING_SET_ROUNDS times, and never more than the first |W| at once (EM is not close yet).
    """
    n, k = Xt.shape
    r = 1.0 - Xt @ beta
    m0 = working_set_size(n, k)
    work = np.zeros(n, dtype=bool)
    work[np.argpartition(np.abs(r), m0 - 1)[:m0] if m0 < n else slice(None)] = True
    over = ~work & (r > 0.0)
    c = Xt.T @ over.astype(np.float64)
    if offset is not None:
        c += offset
    for _ in range(WORKING_SET_ROUNDS):
        out = solve(np.flatnonzero(work), over, c, beta)
        if out is None:
            return None
        beta, exact = out
        if exact is not None:
            return exact
        r = 1.0 - Xt @ beta
        moved = ~work & np.where(over, r < -KKT_TOL, r > KKT_TOL)
        n_moved = int(moved.sum())
        if n_moved == 0 or n_moved > m0:
            return None
        work |= moved
        c -= Xt[moved & over].sum(axis=0)
        over &= ~moved
    return None


def finish_ridge(
    Xt: np.ndarray,
    beta: np.ndarray,
    nu: float,
    penalised: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray | None:
    """α = 2 mode: working set, interior point, crossover (module docstring); None unless KKT."""
    lam = np.where(penalised, nu**-2.0, 0.0)

    def solve(
        idx: np.ndarray, over: np.ndarray, c: np.ndarray, beta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        A = Xt[idx]
        sol = interior_point(A, c, lam, beta)
        if sol is None:
            return None
        beta_w, a, on_w = sol
        hinge_w = ~on_w & (a > 0.5)
        on = np.zeros(Xt.shape[0], dtype=bool)
        on[idx[on_w]] = True
        over_all = over.copy()
        over_all[idx[hinge_w]] = True
        face = ridge_face(Xt, on, c + A[hinge_w].sum(axis=0), lam)
        if face is None:
            return beta_w, None
        exact, a_on = face
        r = 1.0 - Xt @ exact
        ok = (
            np.all(a_on >= -KKT_TOL)
            and np.all(a_on <= 1.0 + KKT_TOL)
            and np.all(r[over_all] >= -KKT_TOL)
            and np.all(r[~over_all & ~on] <= KKT_TOL)
        )
        return beta_w, exact if ok else None

    return working_set_finish(Xt, beta, solve, offset)


def lasso_lp(
    A: np.ndarray, c: np.ndarray, weight: float, penalised: np.ndarray
) -> np.ndarray | None:
    """argmin Σ max(1 − Aβ, 0) − c'β + w Σ_pen |β_j| from its dual LP (HiGHS dual simplex).

    Dual: max Σ a_i s.t. |A_P'a + c_P| ≤ w, A_U'a = −c_U, 0 ≤ a ≤ 1 (P penalised, U not): as many
    rows as coefficients, so far smaller than the primal. β is the vector of its row multipliers.
    """
    m, k = A.shape
    Ap, Au = A[:, penalised], A[:, ~penalised]
    res = scipy.optimize.linprog(
        -np.ones(m),
        A_ub=np.vstack([Ap.T, -Ap.T]),
        b_ub=np.concatenate([weight - c[penalised], weight + c[penalised]]),
        A_eq=Au.T if Au.shape[1] else None,
        b_eq=-c[~penalised] if Au.shape[1] else None,
        bounds=(0.0, 1.0),
        method="highs-ds",
    )
    if res.status != 0:
        return None
    n_pen = Ap.shape[1]
    mu = res.ineqlin.marginals
    beta = np.empty(k)
    beta[penalised] = mu[n_pen:] - mu[:n_pen]
    if Au.shape[1]:
        beta[~penalised] = -res.eqlin.marginals
    return beta


def _lasso_vertex(
    Xt: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    tau: float,
    penalised: np.ndarray,
    delta: float,
    offset: np.ndarray | None = None,
) -> np.ndarray | None:
    """α = 1 vertex solve: x̃_i'β = 1 on E, β_j = 0 on Z; dual μ ∈ [0, 2], |g_Z| ≤ 1 certify it."""
    on, over = np.abs(r) <= delta, r > delta
    free = ~penalised | (np.abs(beta) > delta)
    if on.sum() != free.sum() or not free.any():
        return None
    A = Xt[on]
    sign = np.where(penalised, np.sign(beta), 0.0)
    held = Xt[over].sum(axis=0)
    pull = 2.0 * (held if offset is None else held + offset)
    try:
        beta_f = np.linalg.solve(A[:, free], np.ones(A.shape[0]))
        mu = np.linalg.solve(A[:, free].T, tau * sign[free] - pull[free])
    except np.linalg.LinAlgError:
        return None
    new = np.zeros_like(beta)
    new[free] = beta_f
    g_zero = (pull[~free] + A[:, ~free].T @ mu) / tau
    ok = (
        np.all(mu >= -KKT_TOL)
        and np.all(mu <= 2.0 + KKT_TOL)
        and np.all(np.abs(g_zero) <= 1.0 + KKT_TOL)
        and np.all(np.sign(new[free & penalised]) == sign[free & penalised])
    )
    return new if ok else None


def lasso_vertex(
    Xt: np.ndarray,
    beta: np.ndarray,
    nu: float,
    penalised: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray | None:
    """The α = 1 vertex read off ``beta`` at a ladder of thresholds; None unless KKT-certified."""
    tau = 1.0 / nu
    r = 1.0 - Xt @ beta
    for delta in LASSO_THRESHOLDS:
        cand = _lasso_vertex(Xt, r, beta, tau, penalised, delta, offset)
        if cand is None:
            continue
        r_new = 1.0 - Xt @ cand
        on, over = np.abs(r) <= delta, r > delta
        under = ~on & ~over
        if np.all(r_new[over] >= -KKT_TOL) and np.all(r_new[under] <= KKT_TOL):
            return cand
    return None


def finish_lasso(
    Xt: np.ndarray,
    beta: np.ndarray,
    nu: float,
    penalised: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray | None:
    """α = 1 mode: the vertex of the EM iterate, else working set, LP and vertex; None unless KKT."""
    exact = lasso_vertex(Xt, beta, nu, penalised, offset)
    if exact is not None:
        return exact

    def solve(
        idx: np.ndarray, over: np.ndarray, c: np.ndarray, beta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        beta_w = lasso_lp(Xt[idx], c, 0.5 / nu, penalised)
        if beta_w is None:
            return None
        return beta_w, lasso_vertex(Xt, beta_w, nu, penalised, offset)

    return working_set_finish(Xt, beta, solve, offset)


def certified_mode(
    Xt: np.ndarray,
    beta: np.ndarray,
    alpha: float,
    nu: float,
    penalised: np.ndarray,
    offset: np.ndarray | None = None,
) -> np.ndarray | None:
    """The exact mode near the EM iterate ``beta`` for α ∈ {1, 2}, KKT-certified; else None.

    ``offset`` (k,) is Σ x̃_i over rows left out of ``Xt`` that are held in the hinge (r_i > 0):
    their terms are linear, −offset'β. The certificate then covers the rows of ``Xt`` only; the
    caller checks that the rows left out keep their sides (``bayes_em_partitions``).
    """
    if alpha == 2.0:
        return finish_ridge(Xt, beta, nu, penalised, offset)
    if alpha == 1.0:
        return finish_lasso(Xt, beta, nu, penalised, offset)
    return None
