"""MCMC non-convergence is reported: R-hat > 1.01 or bulk ESS < 100 warns, naming coefficients."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

from bsvm_core import BayesianSVM, ConvergenceWarning, MCMCConvergenceWarning
from bsvm_core.mcmc_convergence import chain_diagnostics, convergence_message


def test_warning_is_a_convergence_warning() -> None:
    assert issubclass(MCMCConvergenceWarning, ConvergenceWarning)
    assert issubclass(MCMCConvergenceWarning, SkConvergenceWarning)


def test_short_run_on_breast_cancer_warns_and_names_coefficients() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    est = BayesianSVM(method="mcmc", n_draws=200, burn_in=50, random_state=0)
    with pytest.warns(MCMCConvergenceWarning, match=r"R-hat > 1.01 for .*x\d+ \(1\.\d+\)"):
        est.fit(X, y)
    assert not est.converged_
    assert np.nanmax(est.rhat_) > 1.01 and np.nanmin(est.ess_) < 100
    assert est.rhat_.shape == est.ess_.shape == (1, 31)


def test_long_well_mixed_run_is_silent() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] + rng.normal(size=60) > 0).astype(int)
    est = BayesianSVM(method="mcmc", alpha=2.0, nu=0.3, n_draws=1000, burn_in=200, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MCMCConvergenceWarning)
        est.fit(X, y)
    assert est.converged_
    assert np.nanmax(est.rhat_) <= 1.01 and np.nanmin(est.ess_) >= 100


def test_multiclass_names_carry_the_class() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(45, 2))
    y = np.repeat(["a", "b", "c"], 15)
    with pytest.warns(MCMCConvergenceWarning, match=r"\(class '[abc]'\)"):
        BayesianSVM(method="mcmc", n_draws=8, burn_in=0, n_chains=2, random_state=0).fit(X, y)


def test_diagnostics_of_independent_shifted_and_constant_chains() -> None:
    rng = np.random.default_rng(2)
    draws = rng.normal(size=(1, 4, 500, 3))
    draws[0, :, :, 1] += np.arange(4)[:, None] * 3.0  # chains stuck in different places
    draws[0, :, :, 2] = 1.5  # a coefficient that never moves
    rhat, ess = chain_diagnostics(draws)
    assert rhat[0, 0] < 1.01 and ess[0, 0] > 1000
    assert rhat[0, 1] > 2 and ess[0, 1] < 100
    assert np.isnan(rhat[0, 2]) and np.isnan(ess[0, 2])


def test_message_lists_the_worst_first_and_counts_the_rest() -> None:
    names = [f"x{j}" for j in range(8)]
    rhat = np.array([1.0, 1.5, 1.2, 1.02, 1.3, 1.04, 1.05, np.nan])
    ess = np.full(8, 500.0)
    message = convergence_message(names, rhat, ess)
    assert message is not None
    assert "x1 (1.5), x4 (1.3), x2 (1.2), x6 (1.05), x5 (1.04) and 1 more" in message
    assert "ESS" not in message
    assert convergence_message(names, np.full(8, 1.001), ess) is None
    ess[3] = 12.0
    assert "bulk ESS < 100 for x3 (12)" in convergence_message(names, np.full(8, 1.0), ess)


def test_fewer_than_eight_draws_leave_diagnostics_undefined() -> None:
    """Split chains need 4 draws per half: with 4-7 draws R-hat/ESS are NaN, not a crash."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    est = BayesianSVM(method="mcmc", n_draws=5, burn_in=1, n_chains=2, random_state=0)
    with pytest.warns(MCMCConvergenceWarning, match="cannot be assessed"):
        est.fit(X, (X[:, 0] > 0).astype(int))
    assert np.all(np.isnan(est.rhat_)) and not est.converged_
    assert all(row["rhat"] is None for row in est.posterior_summary())
