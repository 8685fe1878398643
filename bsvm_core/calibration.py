"""Probability calibration: Platt's sigmoid and pairwise coupling of binary probabilities."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit


def fit_platt(f: np.ndarray, y_pm: np.ndarray, max_iter: int = 100) -> tuple[float, float]:
    """Fit P(y=+1|f) = 1/(1+exp(A f + B)) by Newton's method; Lin, Lin & Weng (2007), Algorithm 1.

    Targets are Platt's smoothed labels (N+ + 1)/(N+ + 2) and 1/(N- + 2), which keep the fit finite
    on separable decision values.
    """
    f = np.asarray(f, dtype=np.float64)
    pos = y_pm > 0
    n_pos, n_neg = float(pos.sum()), float((~pos).sum())
    t = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    a, b = 0.0, float(np.log((n_neg + 1.0) / (n_pos + 1.0)))
    sigma, eps = 1e-12, 1e-5

    def objective(a_: float, b_: float) -> float:
        # -sum t log p + (1 - t) log(1 - p) with p = expit(-z)
        z = f * a_ + b_
        return float(-np.sum(t * log_expit(-z) + (1.0 - t) * log_expit(z)))

    fval = objective(a, b)
    for _ in range(max_iter):
        p = expit(-(f * a + b))
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(np.dot(f * f, d2))
        h22 = sigma + float(d2.sum())
        h21 = float(np.dot(f, d2))
        d1 = t - p
        g1, g2 = float(np.dot(f, d1)), float(d1.sum())
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        da = -(h22 * g1 - h21 * g2) / det
        db = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * da + g2 * db
        step = 1.0
        while step >= 1e-10:
            new_a, new_b = a + step * da, b + step * db
            new_f = objective(new_a, new_b)
            if new_f < fval + 1e-4 * step * gd:
                a, b, fval = new_a, new_b, new_f
                break
            step /= 2.0
        else:
            break
    return a, b


def platt_proba(f: np.ndarray, a: float, b: float) -> np.ndarray:
    """Evaluate P(y=+1|f) = 1/(1+exp(A f + B)) without overflow."""
    return expit(-(np.asarray(f, dtype=np.float64) * a + b))


def pairwise_coupling(r: np.ndarray, max_iter: int = 100, tol: float = 1e-12) -> np.ndarray:
    """Class probabilities from pairwise ones; Wu, Lin & Weng (2004), method 2 (as in libsvm).

    ``r`` has shape (n, K, K) with ``r[:, i, j]`` = P(y = i | y in {i, j}); returns (n, K).
    Solves min_p ½ p'Qp s.t. sum p = 1 with Q_ii = sum_{s≠i} r_si², Q_ij = -r_ji r_ij.
    """
    n, k, _ = r.shape
    Q = -r.transpose(0, 2, 1) * r
    diag = np.einsum("nsi,nsi->ni", r, r) - np.einsum("nii->ni", r * r)
    idx = np.arange(k)
    Q[:, idx, idx] = diag
    p = np.full((n, k), 1.0 / k)
    for _ in range(max(max_iter, k)):
        Qp = np.einsum("nij,nj->ni", Q, p)
        pQp = np.einsum("ni,ni->n", p, Qp)
        if np.max(np.abs(Qp - pQp[:, None])) < tol:
            break
        for t in range(k):
            diff = (-Qp[:, t] + pQp) / Q[:, t, t]
            p[:, t] += diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2.0 * Qp[:, t])) / (1.0 + diff) ** 2
            Qp = (Qp + diff[:, None] * Q[:, t, :]) / (1.0 + diff)[:, None]
            p /= (1.0 + diff)[:, None]
    return p
