"""Primal-dual active-set polish: the exact, finite finish of the linear SVM solver.

The KKT conditions of min ½‖w‖² + C Σ hinge (dual α ∈ [0, C]^n, Σ α_i y_i = 0) split the points by
their margin m_i = y_i(w'x_i + b): α_i = 0 when m_i > 1 (set R), α_i = C when m_i < 1 (set L) and
m_i = 1 with α_i ∈ [0, C] for the free support vectors (set F). For a guessed partition they are the
linear system (Z = diag(y) X, c_L = C Σ_L y_i x_i, w = c_L + Z_F'α_F)::

    [ Z_F Z_F'  y_F ] [α_F]   [ 1 − Z_F c_L   ]
    [ y_F'      0   ] [ b ] = [ −C Σ_L y_i    ]

of size |F| + 1 (≤ d + 2 at a non-degenerate optimum). A step solves it; if the solution meets every
KKT condition it is the optimum to round-off, otherwise every point is re-partitioned by the rule
a_i = α_i / C − (m_i − 1): R if a_i ≤ 0, L if a_i ≥ 1, F otherwise — the primal-dual active-set
method, a semismooth Newton method (Hintermüller, Ito & Kunisch 2003). The guess comes from the
pieces of the smoothed hinge (`linear_smooth`), which identify the partition once μ is small enough.
A reduced problem adds the fixed rows' term g = C Σ y_i (x_i, 1) (``lin``) to c_L and to C Σ_L y_i.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .linear_objective import optimal_intercept

R_SET, F_SET, L_SET = 0, 1, 2


def solve_partition(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    state: np.ndarray,
    fit_intercept: bool,
    lin: np.ndarray | None = None,
) -> tuple[np.ndarray, float, np.ndarray]:
    """Solve the KKT system of one partition (state per point in R/F/L); return (w, b, α)."""
    d = X.shape[1]
    free = state == F_SET
    at_c = state == L_SET
    c_l = C * (X.T @ np.where(at_c, y, 0.0))
    sum_l = C * y[at_c].sum()
    if lin is not None:
        c_l += lin[:d]
        sum_l += float(lin[d]) if fit_intercept else 0.0
    alpha = np.where(at_c, C, 0.0)
    Zf = y[free, None] * X[free]
    nf = Zf.shape[0]
    if nf == 0:
        shift = 0.0 if lin is None or not fit_intercept else float(lin[d]) / C
        b = optimal_intercept(X @ c_l, y, shift) if fit_intercept else 0.0
        return c_l, b, alpha
    rhs_top = 1.0 - Zf @ c_l
    if fit_intercept:
        K = np.zeros((nf + 1, nf + 1))
        K[:nf, :nf] = Zf @ Zf.T
        K[:nf, nf] = y[free]
        K[nf, :nf] = y[free]
        rhs = np.append(rhs_top, -sum_l)
    else:
        K = Zf @ Zf.T
        rhs = rhs_top
    sol = linalg.lstsq(K, rhs, check_finite=False, lapack_driver="gelsd")[0]
    alpha[free] = sol[:nf]
    b = float(sol[nf]) if fit_intercept else 0.0
    return c_l + Zf.T @ sol[:nf], b, alpha


def kkt_satisfied(
    X: np.ndarray, y: np.ndarray, C: float, w: np.ndarray, b: float, alpha: np.ndarray, tol: float
) -> bool:
    """Whether (w, b, α) meets the KKT conditions: margins in absolute units, α relative to C."""
    lam = y * (X @ w + b) - 1.0
    tol_m = tol * max(1.0, float(np.abs(lam).max(initial=0.0)))
    frac = alpha / C
    lower = frac <= tol
    upper = frac >= 1.0 - tol
    return bool(
        np.all(frac >= -tol)
        and np.all(frac <= 1.0 + tol)
        and np.all(lam[lower & ~upper] >= -tol_m)
        and np.all(lam[upper & ~lower] <= tol_m)
        and np.all(np.abs(lam[~lower & ~upper]) <= tol_m)
    )


def active_set_polish(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    z: np.ndarray,
    mu: float,
    fit_intercept: bool,
    max_steps: int = 3,
    max_free: int | None = None,
    kkt_tol: float = 1e-9,
    lin: np.ndarray | None = None,
) -> tuple[np.ndarray, float, np.ndarray, int, bool]:
    """Active-set steps from the partition of the smoothed hinge pieces of z = 1 − m at width μ.

    Returns (w, b, α, steps, exact); ``exact`` is True when a partition met every KKT condition.
    Gives up (exact False) after ``max_steps`` or when more than ``max_free`` points would be free.
    """
    max_free = max_free if max_free is not None else 4 * (X.shape[1] + 1)
    state = np.where(z <= 0.0, R_SET, np.where(z >= mu, L_SET, F_SET))
    w, b, alpha = np.zeros(X.shape[1]), 0.0, np.zeros(X.shape[0])
    for step in range(1, max_steps + 1):
        if np.count_nonzero(state == F_SET) > max_free:
            return w, b, alpha, step - 1, False
        w, b, alpha = solve_partition(X, y, C, state, fit_intercept, lin)
        if kkt_satisfied(X, y, C, w, b, alpha, kkt_tol):
            return w, b, np.clip(alpha, 0.0, C), step, True
        a = alpha / C - (y * (X @ w + b) - 1.0)
        state = np.where(a <= 0.0, R_SET, np.where(a >= 1.0, L_SET, F_SET))
    return w, b, alpha, max_steps, False
