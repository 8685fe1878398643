"""``BayesianSVM(multiclass="ovo")``: one binary Bayesian SVM per pair of classes on the pair's rows,
against per-pair references fitted independently (libsvm at α = 2, ν = √C), with libsvm's votes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris, load_wine
from sklearn.svm import SVC

from bsvm_core import BayesianSVM
from bsvm_core.exceptions import BsvmValueError, MCMCConvergenceWarning
from bsvm_core.partitions import ArrayPartitions

PAIRS_3 = [(1, 0), (2, 0), (2, 1)]


def standardised(X: np.ndarray) -> np.ndarray:
    """X on the scale every problem of the model is fitted on: over all rows (n divisor)."""
    return (X - X.mean(0)) / X.std(0)


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_em_alpha2_pairs_are_libsvm_on_each_pairs_rows(C: float) -> None:
    X, y = load_wine(return_X_y=True)
    ours = BayesianSVM(method="em", alpha=2.0, nu=np.sqrt(C), multiclass="ovo", tol=1e-12)
    ours.fit(X, y)
    assert ours.binary_problems_ == PAIRS_3 and ours.coef_std_.shape == (3, 13)
    Z = standardised(X)
    decisions = np.empty((len(y), 3))
    for p, (pos, neg) in enumerate(PAIRS_3):
        rows = (y == pos) | (y == neg)
        svc = SVC(kernel="linear", C=C, tol=1e-10).fit(Z[rows], y[rows] == pos)
        np.testing.assert_allclose(ours.coef_std_[p], svc.coef_.ravel(), atol=1e-4)
        assert ours.beta_std_[p, 0] == pytest.approx(svc.intercept_[0], abs=1e-4)
        decisions[:, p] = svc.decision_function(Z)
    votes = np.zeros((len(y), 3))
    for p, (pos, neg) in enumerate(PAIRS_3):
        votes[:, pos] += decisions[:, p] > 0
        votes[:, neg] += decisions[:, p] <= 0
    sure = np.sort(votes, axis=1)[:, -1] > np.sort(votes, axis=1)[:, -2]  # no tie in votes
    assert sure.mean() > 0.9
    np.testing.assert_array_equal(ours.predict(X)[sure], np.argmax(votes, axis=1)[sure])
    D = ours.decision_function(X)
    assert D.shape == (len(y), 3)
    np.testing.assert_array_equal(np.argmax(D, axis=1), ours.predict(X))
    np.testing.assert_array_equal(np.floor(D + 1 / 3)[sure], votes[sure])  # votes + (−1/3, 1/3)


def test_ovr_is_unchanged_and_two_classes_ignore_the_scheme() -> None:
    X, y = load_iris(return_X_y=True)
    ovr = BayesianSVM(method="em", alpha=1.0).fit(X, y)
    assert ovr.binary_problems_ == [(0, -1), (1, -1), (2, -1)]
    twice = clone(ovr).set_params(multiclass="ovr").fit(X, y)
    np.testing.assert_array_equal(ovr.coef_, twice.coef_)
    two = y < 2
    a = BayesianSVM(method="em", multiclass="ovo").fit(X[two], y[two])
    b = BayesianSVM(method="em", multiclass="ovr").fit(X[two], y[two])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.binary_problems_ == b.binary_problems_ == [(1, 0)]
    with pytest.raises(BsvmValueError, match="'ovr' or 'ovo'"):
        BayesianSVM(multiclass="all").fit(X, y)


def test_mcmc_ovo_draws_intervals_and_summary_per_pair() -> None:
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    est = BayesianSVM(
        method="mcmc", alpha=2.0, multiclass="ovo", n_draws=300, burn_in=100, n_chains=2,
        random_state=0,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCMCConvergenceWarning)
        est.fit(X, labels)
    assert est.coef_draws_.shape == (2, 300, 3, 4)
    lower, upper = est.predict_interval(X[:5], level=0.9)
    assert lower.shape == upper.shape == (5, 3) and np.all(lower < upper)
    pair_values = X[:5] @ est.coef_.T + est.intercept_
    assert np.all((lower <= pair_values) & (pair_values <= upper))
    rows = est.posterior_summary()
    assert len(rows) == 3 * 5
    assert [(r["class"], r["versus"]) for r in rows[::5]] == [
        ("versicolor", "setosa"),
        ("virginica", "setosa"),
        ("virginica", "versicolor"),
    ]
    assert (est.predict(X) == labels).mean() > 0.9


def test_convergence_warning_names_the_pair() -> None:
    X, y = load_iris(return_X_y=True)
    est = BayesianSVM(method="mcmc", multiclass="ovo", n_draws=10, burn_in=0, n_chains=2,
                      random_state=1)  # fmt: skip
    with pytest.warns(MCMCConvergenceWarning) as caught:
        est.fit(X, y)
    message = str(caught[0].message)
    assert "R-hat > 1.01" in message and " vs " in message and "(class" not in message
    assert "(2 vs 1)" in message or "(1 vs 0)" in message or "(2 vs 0)" in message


def test_gibbs_by_partitions_samples_each_pair_on_its_rows() -> None:
    X, y = load_iris(return_X_y=True)
    kw = {"method": "mcmc", "alpha": 2.0, "multiclass": "ovo", "n_draws": 400, "burn_in": 100,
          "n_chains": 2, "random_state": 0}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCMCConvergenceWarning)
        parts = BayesianSVM(**kw).fit_partitions(ArrayPartitions.split(X, y, 3))
        memory = BayesianSVM(**kw).fit(X, y)
    assert parts.coef_draws_.shape == memory.coef_draws_.shape == (2, 400, 3, 4)
    # the same posterior from other random streams: means within a few posterior sds
    sd = memory.coefficient_draws("standardised").std(axis=(1, 2))
    gap = np.abs(parts.coefficient_means("standardised") - memory.coefficient_means("standardised"))
    assert np.all(gap < 0.5 * sd + 1e-9)
    two = y < 2
    est = BayesianSVM(multiclass="ovo").fit_partitions(ArrayPartitions.split(X[two], y[two], 2))
    assert est.binary_problems_ == [(1, 0)]


def test_a_model_stored_before_one_vs_one_reads_as_one_vs_rest() -> None:
    """Its pickled state has no ``binary_problems_``: loading sets the one-vs-rest problems."""
    X, y = load_iris(return_X_y=True)
    est = BayesianSVM(method="em", alpha=1.0).fit(X, y)
    state = est.__getstate__()
    del state["binary_problems_"]
    old = BayesianSVM.__new__(BayesianSVM)
    old.__setstate__(state)
    assert old.binary_problems_ == [(0, -1), (1, -1), (2, -1)]
    np.testing.assert_array_equal(old.predict(X), est.predict(X))
    assert old.posterior_summary() == est.posterior_summary()
    unfitted = BayesianSVM.__new__(BayesianSVM)
    unfitted.__setstate__(BayesianSVM().__getstate__())
    assert not hasattr(unfitted, "binary_problems_")
