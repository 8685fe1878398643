"""Gibbs by row partitions against the pseudo-posterior by 2-D quadrature (test_gibbs's reference)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bsvm_core import diagnostics as dg
from bsvm_core.bayesian_svm import BayesianSVM
from bsvm_core.partitions import ArrayPartitions

from .test_gibbs import A_NU, B_NU, quadrature, quantile_mcse, two_coefficient_problem

CHAINS, DRAWS, BURN = 4, 2500, 300


def tiny_partitions() -> ArrayPartitions:
    """test_gibbs's two-coefficient problem as raw (x, y) in partitions of 4, 1 and 25 rows."""
    Xt = two_coefficient_problem()
    y = Xt[:, 0]
    x = (Xt[:, 1] * y)[:, None]  # standardised already: fit's standardisation keeps it
    return ArrayPartitions([(x[:4], y[:4]), (x[4:5], y[4:5]), (x[5:], y[5:])])


@pytest.mark.parametrize(
    ("alpha", "learn_nu"), [(2.0, False), (1.0, False), (2.0, True), (1.0, True), (1.5, False)]
)
def test_gibbs_by_partitions_matches_quadrature(alpha: float, learn_nu: bool) -> None:
    ref = quadrature(alpha, 1.0, learn_nu)
    est = BayesianSVM(method="mcmc", alpha=alpha, nu=1.0, learn_nu=learn_nu, a_nu=A_NU, b_nu=B_NU,
                      n_draws=DRAWS, burn_in=BURN, n_chains=CHAINS, random_state=5)  # fmt: skip
    est.fit_partitions(tiny_partitions())
    assert est.n_passes_ == 1 + BURN + DRAWS  # moments, then one pass per sweep for all chains
    draws = est.beta_draws_std_[0]  # (chains, draws, 2): intercept, slope
    for j in range(2):
        chains = draws[:, :, j]
        assert dg.rhat_rank(chains) < 1.01
        mcse = chains.std() / np.sqrt(dg.ess_bulk(chains))
        assert abs(est.beta_std_[0, j] - ref[f"mean{j}"]) < 4 * mcse  # Rao-Blackwellised
        assert abs(chains.mean() - ref[f"mean{j}"]) < 4 * mcse
        for p, q_ref, dens in zip((0.05, 0.95), ref[f"q{j}"], ref[f"density{j}"], strict=True):
            tol = 4 * quantile_mcse(chains, q_ref, p, dens)
            assert abs(np.quantile(chains, p) - q_ref) < tol, (j, p, q_ref, tol)


def test_gibbs_by_partitions_one_pass_per_sweep_for_every_class_and_chain() -> None:
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 3))
    X = Z * [1.0, 5.0, 0.2] + 7.0
    y = np.argmax(Z + rng.normal(size=(300, 3)), axis=1)
    seen: list[float] = []
    est = BayesianSVM(method="mcmc", n_draws=40, burn_in=10, n_chains=3, random_state=1)
    est.set_progress_callback(seen.append)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 40 draws: too few to call converged
        est.fit_partitions(ArrayPartitions.split(X, y, 4))
    assert est.n_passes_ == 1 + 50
    assert est.coef_draws_.shape == (3, 40, 3, 3) and est.coef_.shape == (3, 3)
    assert seen[-1] == 1.0
    lo, hi = est.predict_interval(X[:5])
    assert np.all(lo <= hi)
    # the same seed gives the same draws; another partitioning gives others of the same law
    again = BayesianSVM(method="mcmc", n_draws=40, burn_in=10, n_chains=3, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again.fit_partitions(ArrayPartitions.split(X, y, 4))
    np.testing.assert_array_equal(again.coef_draws_, est.coef_draws_)
