"""LDA and QDA against scikit-learn and against textbook Gaussian densities.

Convention: our covariances are unbiased (LDA pooled with divisor n − K, QDA per class n_k − 1);
scikit-learn 1.9 divides by n (LDA's svd solver) and n_k (QDA). To compare probabilities exactly,
scikit-learn is fitted on a copy of the data whose within-class residuals are stretched so that its
biased estimate equals our unbiased one: x_i ← μ_k + s (x_i − μ_k) with s² = n/(n − K) (LDA) or
n_k/(n_k − 1) (QDA). Class means are unchanged, so both models are the same Gaussians. Predictions
are also compared with scikit-learn on the raw data.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import multivariate_normal
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as SkLDA
from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis as SkQDA
from sklearn.model_selection import train_test_split

from bsvm_core.exceptions import SingularCovarianceWarning
from bsvm_core.lda import LDA
from bsvm_core.qda import EIGEN_FLOOR, QDA, ridge_to_floor

LOADERS = {"iris": load_iris, "wine": load_wine, "digits": load_digits}


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    return LOADERS[name](return_X_y=True)


def _stretch_residuals(X: np.ndarray, y: np.ndarray, pooled: bool) -> np.ndarray:
    """Data on which scikit-learn's biased covariance equals our unbiased one (module docstring)."""
    classes = np.unique(y)
    n, K = X.shape[0], classes.shape[0]
    out = X.copy()
    for k in classes:
        rows = y == k
        n_k = rows.sum()
        s2 = n / (n - K) if pooled else n_k / (n_k - 1)
        mu = X[rows].mean(axis=0)
        out[rows] = mu + np.sqrt(s2) * (X[rows] - mu)
    return out


# ---------------------------------------------------------------- LDA


@pytest.mark.parametrize("name", ["iris", "wine", "digits"])
def test_lda_matches_sklearn_svd_solver(name: str) -> None:
    X, y = _data(name)
    ours = LDA().fit(X, y)
    np.testing.assert_array_equal(ours.predict(X), SkLDA(solver="svd").fit(X, y).predict(X))
    ref = SkLDA(solver="svd").fit(_stretch_residuals(X, y, pooled=True), y)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.means_, ref.means_, rtol=0, atol=1e-10)


def test_lda_digits_is_rank_deficient_and_coefficients_match_sklearn() -> None:
    X, y = _data("digits")
    ours = LDA().fit(X, y)
    assert ours.rank_ < X.shape[1]  # some pixels are constant: Σ is singular
    ref = SkLDA(solver="svd").fit(_stretch_residuals(X, y, pooled=True), y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-7, atol=1e-9)


def test_lda_covariance_is_pooled_unbiased_and_posterior_is_textbook() -> None:
    X, y = _data("wine")
    classes, counts = np.unique(y, return_counts=True)
    n, K = X.shape[0], classes.shape[0]
    cov = sum((c - 1) * np.cov(X[y == k].T) for k, c in zip(classes, counts, strict=True))
    cov /= n - K
    ours = LDA().fit(X, y)
    np.testing.assert_allclose(ours.covariance_, cov, rtol=1e-10, atol=1e-12)
    # δ_k(x) = x'Σ⁻¹μ_k − ½μ_k'Σ⁻¹μ_k + log π_k  (ESL eq. 4.10), posterior = softmax δ.
    means = np.stack([X[y == k].mean(0) for k in classes])
    A = np.linalg.solve(cov, means.T)
    delta = X @ A - 0.5 * np.sum(means.T * A, axis=0) + np.log(counts / n)
    np.testing.assert_allclose(ours.predict_proba(X), softmax(delta, axis=1), atol=1e-8)
    np.testing.assert_allclose(ours.decision_function(X), ours.predict_log_proba(X))


def test_lda_binary_coef_is_log_odds_like_sklearn() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    ours = LDA().fit(X, y)
    ref = SkLDA(solver="svd").fit(_stretch_residuals(X, y, pooled=True), y)
    assert ours.coef_.shape == (1, X.shape[1]) and ours.intercept_.shape == (1,)
    f = ours.decision_function(X)
    assert f.shape == (X.shape[0],)
    np.testing.assert_allclose(f, X @ ours.coef_[0] + ours.intercept_[0])
    np.testing.assert_allclose(f, ref.decision_function(X), rtol=1e-7, atol=1e-7)
    log_p = ours.predict_log_proba(X)
    np.testing.assert_allclose(f, log_p[:, 1] - log_p[:, 0], atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X), ours.classes_[(f > 0).astype(int)])


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_lda_given_priors(name: str) -> None:
    X, y = _data(name)
    priors = [0.2, 0.3, 0.5]
    ours = LDA(priors=priors).fit(X, y)
    np.testing.assert_allclose(ours.priors_, priors)
    ref = SkLDA(solver="svd", priors=priors).fit(_stretch_residuals(X, y, pooled=True), y)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-8)


# ---------------------------------------------------------------- QDA


@pytest.mark.parametrize("reg_param", [0.0, 0.3])
@pytest.mark.parametrize("name", ["iris", "wine"])
def test_qda_matches_sklearn(name: str, reg_param: float) -> None:
    X, y = _data(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SingularCovarianceWarning)
        ours = QDA(reg_param=reg_param).fit(X, y)
    np.testing.assert_array_equal(ours.reg_applied_, 0.0)
    raw = SkQDA(reg_param=reg_param).fit(X, y)
    np.testing.assert_array_equal(ours.predict(X), raw.predict(X))
    ref = SkQDA(reg_param=reg_param).fit(_stretch_residuals(X, y, pooled=False), y)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", ["iris", "wine"])
def test_qda_is_bayes_rule_with_unbiased_gaussians(name: str) -> None:
    X, y = _data(name)
    classes = np.unique(y)
    priors = np.array([0.5, 0.25, 0.25])
    ours = QDA(priors=priors).fit(X, y)
    covs = np.stack([np.cov(X[y == k].T) for k in classes])
    np.testing.assert_allclose(ours.covariances_, covs, rtol=1e-9, atol=1e-9)
    log_joint = np.column_stack(
        [
            multivariate_normal(X[y == k].mean(0), covs[i]).logpdf(X) + np.log(priors[i])
            for i, k in enumerate(classes)
        ]
    )
    np.testing.assert_allclose(ours.predict_proba(X), softmax(log_joint, axis=1), atol=1e-8)
    np.testing.assert_allclose(ours.decision_function(X), ours.predict_log_proba(X))
    ref = SkQDA(priors=priors).fit(_stretch_residuals(X, y, pooled=False), y)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-8)


def test_qda_singular_breast_cancer_warns_lifts_and_predicts() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, stratify=y, random_state=0)
    with pytest.raises(np.linalg.LinAlgError):
        SkQDA().fit(X_tr, y_tr)  # the behaviour we replace
    with pytest.warns(SingularCovarianceWarning, match="ridge"):
        qda = QDA().fit(X_tr, y_tr)
    assert np.all(qda.reg_applied_ > 0)
    for k in range(2):
        lam = np.linalg.eigvalsh(np.cov(X_tr[y_tr == qda.classes_[k]].T))
        # the smallest ridge that lifts the smallest eigenvalue to the documented floor
        floor = EIGEN_FLOOR * lam.mean()
        np.testing.assert_allclose(qda.reg_applied_[k], floor - lam.min(), rtol=1e-3)
        np.testing.assert_allclose(qda.scalings_[k].min(), floor, rtol=1e-3)
    proba = qda.predict_proba(X_te)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert qda.score(X_te, y_te) > 0.9


def test_qda_digits_constant_pixels_still_predict() -> None:
    X, y = _data("digits")
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, stratify=y, random_state=0)
    with pytest.warns(SingularCovarianceWarning):
        qda = QDA().fit(X_tr, y_tr)
    assert np.all(qda.reg_applied_ > 0)
    assert qda.score(X_te, y_te) > 0.85


def test_qda_fewer_samples_than_features_is_ridged_covariance() -> None:
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(0, 1, (5, 8)), rng.normal(1, 2, (6, 8))]
    y = np.array([0] * 5 + [1] * 6)
    with pytest.warns(SingularCovarianceWarning, match="ridge"):
        qda = QDA().fit(X, y)
    for k, rows in enumerate([slice(0, 5), slice(5, 11)]):
        cov = np.cov(X[rows].T)  # rank n_k − 1 < 8
        expected = cov + qda.reg_applied_[k] * np.eye(8)
        np.testing.assert_allclose(qda.covariances_[k], expected, atol=1e-10)
        np.testing.assert_allclose(qda.reg_applied_[k], EIGEN_FLOOR * np.trace(cov) / 8, rtol=1e-6)
    np.testing.assert_array_equal(qda.predict(X), y)


def test_ridge_to_floor_is_smallest_lift() -> None:
    assert ridge_to_floor(np.array([1.0, 2.0, 3.0])) == 0.0
    lam = np.array([0.0, 1.0, 2.0])
    assert ridge_to_floor(lam) == pytest.approx(EIGEN_FLOOR * 1.0)
    assert ridge_to_floor(np.zeros(3)) == pytest.approx(EIGEN_FLOOR)


def test_qda_single_sample_class_uses_pooled_covariance() -> None:
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 1, (40, 3)), rng.normal(4, 1, (40, 3)), [[8.0, -8.0, 8.0]]]
    y = np.array(["a"] * 40 + ["b"] * 40 + ["c"])
    with pytest.warns(SingularCovarianceWarning, match="single sample"):
        qda = QDA().fit(X, y)
    pooled = (39 * np.cov(X[:40].T) + 39 * np.cov(X[40:80].T)) / (81 - 3)
    np.testing.assert_allclose(qda.covariances_[2], pooled, rtol=1e-10, atol=1e-12)
    assert qda.predict([[8.0, -8.0, 8.0]])[0] == "c"
    assert np.all(np.isfinite(qda.predict_proba(X)))


def test_qda_all_singleton_classes_is_nearest_mean() -> None:
    X = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    y = np.array([2, 0, 1])
    with pytest.warns(SingularCovarianceWarning):
        qda = QDA().fit(X, y)
    np.testing.assert_array_equal(qda.predict(X + 0.1), y)


# ---------------------------------------------------------------- both


@pytest.mark.parametrize("Est", [LDA, QDA])
def test_string_labels_multiclass_order(Est: type) -> None:
    X, y = _data("iris")
    names = np.array(["virginica", "setosa", "versicolor"])[y]
    est = Est().fit(X, names)
    assert list(est.classes_) == ["setosa", "versicolor", "virginica"]
    assert est.n_features_in_ == 4
    num = Est().fit(X, np.searchsorted(est.classes_, names))
    np.testing.assert_allclose(est.predict_proba(X), num.predict_proba(X))
    np.testing.assert_array_equal(est.predict(X), est.classes_[num.predict(X)])
    assert est.score(X, names) > 0.95


@pytest.mark.parametrize("Est", [LDA, QDA])
@pytest.mark.parametrize(
    "priors, message",
    [([0.5, 0.5], "one value per class"), ([0.5, 0.6, -0.1], "positive"), ([0.2] * 3, "sum to 1")],
)
def test_bad_priors_raise(Est: type, priors: list[float], message: str) -> None:
    X, y = _data("iris")
    with pytest.raises(ValueError, match=message):
        Est(priors=priors).fit(X, y)


@pytest.mark.parametrize(
    "est", [LDA(tol=-1.0), LDA(tol="x"), QDA(reg_param=1.5), QDA(reg_param=-0.1)], ids=repr
)
def test_bad_hyperparameters_raise(est: object) -> None:
    X, y = _data("iris")
    with pytest.raises(ValueError, match=r"tol|reg_param"):
        est.fit(X, y)


@pytest.mark.parametrize("Est", [LDA, QDA])
def test_wrong_feature_count_and_unfitted(Est: type) -> None:
    X, y = _data("iris")
    est = Est()
    with pytest.raises(ValueError, match="not fitted"):
        est.predict(X)
    est.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict_proba(X[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        est.decision_function(np.full((1, 4), np.nan))
