"""The textbook primal subgradient method for the linear SVM (Pegasos steps, full batch).

Dividing P(w, b) = ½‖w‖² + C Σ hinge by C n gives the λ-strongly convex form (λ = 1 / (C n))::

    F(w, b) = (λ/2)‖w‖² + (1/n) Σ_i max(0, 1 − y_i(w'x_i + b)).

The intercept is unpenalised, so F is not strongly convex in b; instead b is minimised out exactly at
every step (an order statistic, `linear_objective.optimal_intercept`). g(w) = min_b F(w, b) is convex
and λ-strongly convex, and ∂_w F(w, b*(w)) is a subgradient of it (Danskin's theorem). The iteration
is Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter 2011, Algorithm 1 with k = n):

    w ← Π_B(w − η_t (λ w − (1/n) Σ_{y_i(w'x_i+b*) < 1} y_i x_i)),   η_t = 1 / (λ t),

with Π_B the projection on the ball ‖w‖ ≤ √(2/λ) that contains the optimum. With a given
``learning_rate`` η₀ the step is η_t = η₀ / (1 + η₀ λ t), which also satisfies Σ η_t = ∞,
Σ η_t² < ∞. Both schedules converge (O(log T / T) for the strongly convex g); the best of the iterates
and of their t-weighted average (Lacoste-Julien, Schmidt & Bach 2012, O(1/T)) is returned.
"""

from __future__ import annotations

import numpy as np

from .linear_objective import LinearSolution, optimal_intercept, primal_from_residuals

CHECK_EVERY = 10
"""Iterations between two tests of the stopping rule."""
MIN_ITER = 100
"""Iterations before the stopping rule is first tested (early Pegasos steps are large)."""


def _evaluate(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, C: float, fit_intercept: bool
) -> tuple[float, float, np.ndarray]:
    """Return (P(w, b*), b*, margins) with the intercept minimised out."""
    s = X @ w
    b = optimal_intercept(s, y) if fit_intercept else 0.0
    m = y * (s + b)
    return primal_from_residuals(w, 1.0 - m, C), b, m


def fit_linear_subgradient(
    X: np.ndarray,
    y: np.ndarray,
    C: float,
    fit_intercept: bool = True,
    tol: float = 1e-4,
    max_iter: int = 1000,
    learning_rate: float | None = None,
) -> LinearSolution:
    """Full-batch Pegasos subgradient descent on P(w, b) with b minimised out; see module docstring.

    Stops after ``max_iter`` iterations or when the best objective improved by less than ``tol``
    (relative) over the second half of the iterations so far (tested every ``CHECK_EVERY``).
    """
    n, d = X.shape
    lam = 1.0 / (C * n)
    radius = np.sqrt(2.0 / lam)
    w = np.zeros(d)
    w_avg = np.zeros(d)
    best_obj, best_b, m = _evaluate(X, y, w, C, fit_intercept)
    best_w = w.copy()
    history = [best_obj]
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        grad = lam * w - (X.T @ np.where(m < 1.0, y, 0.0)) / n
        eta = (
            1.0 / (lam * it)
            if learning_rate is None
            else learning_rate / (1.0 + learning_rate * lam * it)
        )
        w = w - eta * grad
        norm = np.linalg.norm(w)
        if norm > radius:
            w *= radius / norm
        w_avg += (2.0 / (it + 1.0)) * (w - w_avg)
        obj, b, m = _evaluate(X, y, w, C, fit_intercept)
        if obj < best_obj:
            best_obj, best_w, best_b = obj, w.copy(), b
        obj_avg, b_avg, _ = _evaluate(X, y, w_avg, C, fit_intercept)
        if obj_avg < best_obj:
            best_obj, best_w, best_b = obj_avg, w_avg.copy(), b_avg
        history.append(best_obj)
        if (
            it >= MIN_ITER
            and it % CHECK_EVERY == 0
            and history[it // 2] - best_obj <= tol * abs(best_obj)
        ):
            converged = True
            break
    return LinearSolution(best_w, best_b, it, converged, best_obj)
