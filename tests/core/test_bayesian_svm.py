"""BayesianSVM as an estimator: labels, multiclass, scales, summaries, progress and cancellation."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.svm import SVC

from bsvm_core.bayesian_svm import BayesianSVM
from bsvm_core.exceptions import BsvmValueError

MCMC_SMALL = {"n_draws": 150, "burn_in": 50, "n_chains": 2, "random_state": 0}


@pytest.fixture(scope="module")
def binary_data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=120, n_features=4, n_informative=3, n_redundant=0,
                               random_state=0)  # fmt: skip
    return X * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0, y


def test_string_labels_and_decision_sign(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    labels = np.array(["no", "yes"])[y]
    est = BayesianSVM().fit(X, labels)
    assert list(est.classes_) == ["no", "yes"]
    f = est.decision_function(X)
    assert f.shape == (len(X),)
    np.testing.assert_array_equal(est.predict(X), np.where(f > 0, "yes", "no"))
    reference = SVC(kernel="linear").fit(X, labels).score(X, labels)
    assert est.score(X, labels) >= reference - 0.05
    assert est.coef_.shape == (1, 4) and est.intercept_.shape == (1,)


def test_original_and_standardised_scales_agree(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    est = BayesianSVM(alpha=2.0).fit(X, y)
    Z = (X - X.mean(0)) / X.std(0)
    f_std = Z @ est.coef_std_.ravel() + est.beta_std_[0, 0]
    np.testing.assert_allclose(est.decision_function(X), f_std, rtol=1e-9, atol=1e-9)


def test_alpha2_nu_sqrt_c_equals_svc_on_standardised_data() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    C = 0.5
    est = BayesianSVM(alpha=2.0, nu=np.sqrt(C), tol=1e-12, max_iter=50000).fit(X, y)
    svc = SVC(kernel="linear", C=C, tol=1e-10).fit((X - X.mean(0)) / X.std(0), y)
    np.testing.assert_allclose(est.coef_std_.ravel(), svc.coef_.ravel(), atol=1e-4)


def test_iris_one_vs_rest() -> None:
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    est = BayesianSVM(alpha=2.0).fit(X, labels)
    assert est.coef_.shape == (3, 4) and est.decision_function(X).shape == (150, 3)
    assert est.score(X, labels) > 0.9
    assert est.nu_.shape == (3,)
    rows = est.posterior_summary()
    assert len(rows) == 3 * 5 and {r["class"] for r in rows} == set(labels)


def test_em_summary_is_the_mode(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    est = BayesianSVM(method="ecme").fit(X, y)
    rows = est.posterior_summary(scale="original")
    assert [r["name"] for r in rows] == ["intercept", "x0", "x1", "x2", "x3"]
    assert rows[0]["mean"] == pytest.approx(est.intercept_[0])
    np.testing.assert_allclose([r["mean"] for r in rows[1:]], est.coef_.ravel())
    assert all(r["sd"] is None and r["rhat"] is None for r in rows)
    assert est.nu_ > 0 and est.converged_
    with pytest.raises(BsvmValueError, match="posterior draws"):
        est.predict_interval(X)


@pytest.mark.parametrize("method", ["mcmc", "spike_slab"])
def test_mcmc_shapes_summary_and_intervals(
    method: str, binary_data: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = binary_data
    est = BayesianSVM(method=method, **MCMC_SMALL).fit(X, y)
    assert est.coef_draws_.shape == (2, 150, 4) and est.intercept_draws_.shape == (2, 150)
    np.testing.assert_allclose(est.coef_, est.coef_draws_.mean(axis=(0, 1))[None], atol=0.5)
    rows = est.posterior_summary(level=0.9, scale="standardised")
    keys = {"name", "mean", "sd", "lower", "upper", "ess", "rhat"}
    for r in rows:
        assert keys <= set(r) and r["lower"] <= r["upper"] and r["sd"] >= 0
    if method == "spike_slab":
        assert rows[0]["inclusion_prob"] == 1.0
        assert est.inclusion_prob_.shape == (1, 4)
        assert np.all((est.inclusion_prob_ >= 0) & (est.inclusion_prob_ <= 1))
    lower, upper = est.predict_interval(X[:7], level=0.9)
    f = est.decision_function(X[:7])
    assert lower.shape == (7,) and np.all(lower <= upper)
    assert np.mean((lower <= f) & (f <= upper)) >= 5 / 7


def test_mcmc_is_reproducible_and_chains_differ(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    a = BayesianSVM(method="mcmc", **MCMC_SMALL).fit(X, y)
    b = BayesianSVM(method="mcmc", **MCMC_SMALL).fit(X, y)
    np.testing.assert_array_equal(a.coef_draws_, b.coef_draws_)
    assert not np.allclose(a.coef_draws_[0], a.coef_draws_[1])


@pytest.mark.filterwarnings("ignore::bsvm_core.exceptions.MCMCConvergenceWarning")
def test_mcmc_chain_batches_do_not_depend_on_n_jobs(
    binary_data: tuple[np.ndarray, np.ndarray],
) -> None:
    """n_jobs=2 splits the 3 chains into batches [0, 1] and [2]; each chain keeps its own seed,
    so the draws match one batch of 3 up to round-off (short run), and the chain order is kept."""
    X, y = binary_data
    opts = dict(n_chains=3, n_draws=10, burn_in=3, thin=1, random_state=5)
    one = BayesianSVM(method="mcmc", n_jobs=1, **opts).fit(X, y)
    two = BayesianSVM(method="mcmc", n_jobs=2, **opts).fit(X, y)
    assert one.coef_draws_.shape == (3, 10, X.shape[1])
    np.testing.assert_allclose(two.coef_draws_, one.coef_draws_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(two.coef_, one.coef_, rtol=1e-7, atol=1e-9)


def test_progress_callback_reports_and_cancels(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    seen: list[float] = []
    est = BayesianSVM(method="mcmc", **MCMC_SMALL).set_progress_callback(seen.append).fit(X, y)
    assert seen and max(seen) == pytest.approx(1.0) and min(seen) >= 0.0
    assert "_progress_callback" not in clone(est).__dict__
    pickle.loads(pickle.dumps(est))  # a lambda callback must not break persistence

    class Cancelled(Exception):
        pass

    def stop(fraction: float) -> None:
        if fraction > 0.2:
            raise Cancelled

    with pytest.raises(Cancelled):
        BayesianSVM(method="mcmc", **MCMC_SMALL).set_progress_callback(stop).fit(X, y)


@pytest.mark.parametrize(
    "params", [{"alpha": 0.0}, {"alpha": 2.5}, {"nu": -1.0}, {"method": "vb"}, {"n_chains": 0},
               {"multiclass": "all"}, {"b_nu": 0.0},
               {"method": "spike_slab", "alpha": 1.5},
               {"method": "spike_slab", "alpha": 2.0, "learn_nu": True}],
)  # fmt: skip
def test_bad_parameters_raise(params: dict, binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    with pytest.raises(ValueError):
        BayesianSVM(**params).fit(X, y)


def test_too_few_draws_for_r_hat_is_named(binary_data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary_data
    with pytest.raises(ValueError, match="n_draws must be an integer >= 4"):
        BayesianSVM(method="mcmc", n_draws=3, burn_in=0, n_chains=1).fit(X, y)


def test_coefficient_draws_and_means_put_the_intercept_first(
    binary_data: tuple[np.ndarray, np.ndarray],
) -> None:
    X, y = binary_data
    est = BayesianSVM(method="mcmc", alpha=2.0, **MCMC_SMALL).fit(X, y)
    draws = est.coefficient_draws("original")
    assert draws.shape == (1, 2, 150, 1 + X.shape[1])
    np.testing.assert_allclose(draws[0, ..., 0], est.intercept_draws_.reshape(2, 150))
    np.testing.assert_allclose(draws[0, ..., 1:], est.coef_draws_.reshape(2, 150, -1))
    means = est.coefficient_means("standardised")
    np.testing.assert_allclose(means[0, 1:], est.coef_std_.ravel())
    rows = est.posterior_summary(0.9)
    assert [r["mean"] for r in rows] == pytest.approx(est.coefficient_means()[0].tolist())
    with pytest.raises(ValueError, match="mode, not posterior draws"):
        BayesianSVM(method="em").fit(X, y).coefficient_draws()
