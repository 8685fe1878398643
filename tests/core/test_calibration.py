"""Platt scaling and pairwise coupling against independent references."""

import numpy as np
from scipy.optimize import minimize

from bsvm_core.calibration import fit_platt, pairwise_coupling, platt_proba


def _platt_objective(params: np.ndarray, f: np.ndarray, t: np.ndarray) -> float:
    z = params[0] * f + params[1]
    p = 1.0 / (1.0 + np.exp(z))
    return float(-np.sum(t * np.log(p) + (1 - t) * np.log1p(-p)))


def test_platt_matches_generic_minimiser() -> None:
    rng = np.random.default_rng(0)
    y = np.where(rng.random(400) < 0.4, 1.0, -1.0)
    f = 1.3 * y + rng.normal(scale=1.5, size=400)
    a, b = fit_platt(f, y)
    n_pos, n_neg = (y > 0).sum(), (y < 0).sum()
    t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    ref = minimize(_platt_objective, x0=[0.0, 0.0], args=(f, t), method="BFGS", tol=1e-12)
    assert np.allclose([a, b], ref.x, atol=1e-5)
    assert a < 0  # larger decision values mean larger P(+1)


def test_platt_is_finite_on_separable_scores() -> None:
    f = np.r_[np.linspace(1, 3, 50), np.linspace(-3, -1, 50)]
    y = np.r_[np.ones(50), -np.ones(50)]
    a, b = fit_platt(f, y)
    p = platt_proba(f, a, b)
    assert np.all(np.isfinite([a, b]))
    assert p[:50].min() > 0.5 > p[50:].max()


def test_platt_proba_does_not_overflow() -> None:
    p = platt_proba(np.array([-1e6, 0.0, 1e6]), -2.0, 0.0)
    assert np.all(np.isfinite(p))
    assert p[0] == 0.0 and p[2] == 1.0 and p[1] == 0.5


def test_pairwise_coupling_recovers_consistent_probabilities() -> None:
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=6)
    r = p[:, :, None] / (p[:, :, None] + p[:, None, :])
    idx = np.arange(4)
    r[:, idx, idx] = 0.0
    q = pairwise_coupling(r)
    assert np.allclose(q, p, atol=1e-8)
    assert np.allclose(q.sum(axis=1), 1.0)
