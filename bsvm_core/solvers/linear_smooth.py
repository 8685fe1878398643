"""Newton's method on the Huber-smoothed hinge: the first, vectorised phase of the exact linear SVM.

The hinge max(0, z), z = 1 − y(w'x + b), is replaced by its Moreau envelope of width μ::

    h_μ(z) = 0 (z ≤ 0),   z² / (2μ) (0 < z < μ),   z − μ/2 (z ≥ μ),

(Chapelle 2007, "Training a support vector machine in the primal", §4; Nesterov 2005 smoothing).
F_μ(w, b) = ½‖w‖² + C Σ h_μ(z_i) is piecewise quadratic with a (d+1)×(d+1) Newton system, and its
minimiser is the soft-margin SVM whose dual carries the extra term (μ / 2C)‖α‖², with α_i = C h_μ'(z_i).
Hence F_μ − P ∈ [−C n μ / 2, 0] and α_i = C clip(z_i / μ, 0, 1) estimates the exact dual solution.

An optional linear term −g'(w, b) (``lin`` = g) carries the rows a reduced problem holds fixed at
α_i = C: their hinge is the affine C(1 − y_i(w'x_i + b)), so g = C Σ y_i (x_i, 1) (`linear_exact`).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg


def smoothed_objective(w: np.ndarray, z: np.ndarray, C: float, mu: float) -> float:
    """F_μ = ½‖w‖² + C Σ h_μ(z_i) with the Huber-smoothed hinge h_μ; Chapelle (2007) §4."""
    h = np.where(z >= mu, z - 0.5 * mu, np.where(z > 0.0, z * z / (2.0 * mu), 0.0))
    return float(0.5 * (w @ w) + C * h.sum())


def smoothed_newton(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    mu: float,
    w: np.ndarray,
    b: float,
    fit_intercept: bool,
    max_iter: int,
    lin: np.ndarray | None = None,
) -> tuple[np.ndarray, float, int]:
    """Minimise F_μ(w, b) − lin'(w, b) by Newton steps with exact line search; return (w, b, its).

    Stops when a full step keeps every point in the piece of h_μ its Hessian used (the step then
    lands on the exact minimiser of F_μ), when the gradient vanishes, or after ``max_iter`` steps.
    """
    n, d = X.shape
    k = d + 1 if fit_intercept else d
    g_lin = np.zeros(k) if lin is None else lin[:k]
    m = y * (X @ w + b)
    for it in range(1, max_iter + 1):
        z = 1.0 - m
        frac = np.clip(z / mu, 0.0, 1.0)
        quad = (z > 0.0) & (z < mu)
        yf = y * frac
        grad = -g_lin
        grad[:d] += w - C * (X.T @ yf)
        if fit_intercept:
            grad[d] -= C * yf.sum()
        gnorm = np.linalg.norm(grad)
        if gnorm <= 1e-12 * max(1.0, C * n):
            return w, b, it - 1
        Xq = X[quad]
        H = np.empty((k, k))
        H[:d, :d] = (C / mu) * (Xq.T @ Xq)
        H[:d, :d].flat[:: d + 1] += 1.0
        if fit_intercept:
            col = (C / mu) * Xq.sum(axis=0)
            H[:d, d] = col
            H[d, :d] = col
            H[d, d] = (C / mu) * Xq.shape[0] + 1e-10 * (1.0 + np.trace(H[:d, :d]) / d)
        try:
            step = -linalg.cho_solve(
                linalg.cho_factor(H, check_finite=False), grad, check_finite=False
            )
        except linalg.LinAlgError:
            step = -linalg.lstsq(H, grad, check_finite=False)[0]
        dw = step[:d]
        db = float(step[d]) if fit_intercept else 0.0
        dm = y * (X @ dw + db)
        t = exact_line_search(w, dw, z, dm, C, mu, float(g_lin @ step))
        w = w + t * dw
        b = b + t * db
        m = m + t * dm
        if abs(t - 1.0) <= 1e-10:
            z_new = 1.0 - m
            same = np.array_equal((z_new > 0.0) & (z_new < mu), quad) and np.array_equal(
                z_new >= mu, z >= mu
            )
            if same:
                return w, b, it
    return w, b, max_iter


def exact_line_search(
    w: np.ndarray,
    dw: np.ndarray,
    z: np.ndarray,
    dm: np.ndarray,
    C: float,
    mu: float,
    lin_step: float = 0.0,
) -> float:
    """argmin_t F_μ(w + t·dw) − t·lin_step along a descent direction: Newton on the monotone φ'.

    φ'(t) = w'dw − lin_step + t‖dw‖² − C Σ h_μ'(z_i − t dm_i) dm_i is increasing and piecewise
    linear; Newton on it is exact within a piece (the finite line search of Keerthi & DeCoste 2005,
    §3), safeguarded by bisection. Once [lo, hi] brackets the minimiser, the points whose piece is
    the same at both ends enter φ' as a constant and a slope, so later steps touch only the others.
    """
    a, slope = float(w @ dw) - lin_step, float(dw @ dw)
    zz, dd = z, dm

    def derivs(t: float) -> tuple[float, float]:
        g = np.clip((zz - t * dd) * (1.0 / mu), 0.0, 1.0)
        quad = (g > 0.0) & (g < 1.0)
        return a + t * slope - C * float(g @ dd), slope + (C / mu) * float(dd[quad] @ dd[quad])

    g0, _ = derivs(0.0)
    lo, hi, t, compact = 0.0, np.inf, 1.0, False
    for _ in range(100):
        if not compact and hi < np.inf:
            a, slope, zz, dd = _fold_fixed_pieces(a, slope, zz, dd, C, mu, lo, hi)
            compact = True
        g1, h1 = derivs(t)
        if abs(g1) <= 1e-13 * abs(g0):
            return t
        if g1 < 0.0:
            lo = t
        else:
            hi = t
        t_new = t - g1 / h1 if h1 > 0.0 else np.inf
        if not lo < t_new < hi:
            t_new = 2.0 * lo + 1.0 if hi == np.inf else 0.5 * (lo + hi)
        if t_new == t:
            return t
        t = t_new
    return lo if lo > 0.0 else t


def _fold_fixed_pieces(
    a: float, slope: float, z: np.ndarray, dm: np.ndarray, C: float, mu: float, lo: float, hi: float
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Fold into φ'(t) = a + t·slope − C Σ h_μ'(z_i − t dm_i) dm_i the points fixed on [lo, hi].

    z_i − t dm_i is monotone in t, so a point in the same piece at both ends stays in it: on the
    linear piece it adds −C dm_i to a, on the quadratic piece −(C/μ) z_i dm_i to a and (C/μ) dm_i²
    to the slope. Returns (a, slope) and the remaining points.
    """
    x_lo, x_hi = z - lo * dm, z - hi * dm
    pos, lin = x_lo > 0.0, x_lo > mu
    same = (pos == (x_hi > 0.0)) & (lin == (x_hi > mu))
    lin_piece = same & lin
    quad_piece = same & pos & ~lin
    dq = dm[quad_piece]
    a -= C * float(dm[lin_piece].sum()) + (C / mu) * float(z[quad_piece] @ dq)
    slope += (C / mu) * float(dq @ dq)
    return a, slope, z[~same], dm[~same]
