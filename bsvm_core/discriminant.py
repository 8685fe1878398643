"""Gaussian discriminant analysis: the Bayes rule shared by LDA and QDA.

Both models posit class-conditional normal densities ``x | y = k ~ N(mu_k, Sigma_k)`` and class
priors ``pi_k``, and classify by the posterior ``p(k | x) ∝ pi_k N(x; mu_k, Sigma_k)``
(Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., section 4.3).
A subclass learns the Gaussians in ``_fit_gaussians`` and evaluates the joint log-likelihood
``log pi_k + log N(x; mu_k, Sigma_k)`` (up to a term shared by every class) in
``_joint_log_likelihood``; everything else - validation, label encoding, priors, the posterior,
predictions - lives here.

``fit(X, y)`` learns from arrays in memory; ``fit_partitions(parts)`` learns the same model (same
attributes, to round-off) from a ``RowPartitions`` data set too big for one process, e.g. held on
the workers of a Dask cluster, in one pass that brings back only class counts, means and d × d
scatter factors (``discriminant_sums``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._validation import (
    check_fit_data,
    check_predict_data,
    check_range,
    check_squares_finite,
    encode_labels,
)
from .discriminant_sums import class_moments
from .exceptions import BsvmValueError
from .partitions import RowPartitions

PRIORS_SUM_ATOL = 1e-6
"""Given priors must sum to one within this absolute tolerance (they are then renormalised)."""


def resolve_priors(priors: Any, counts: np.ndarray) -> np.ndarray:
    """Return the class priors: the given ones, validated, or the class frequencies n_k / n."""
    n_classes = counts.shape[0]
    if priors is None:
        return counts / counts.sum()
    try:
        p = np.asarray(priors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BsvmValueError(f"priors must be numbers, one per class; got {priors!r}.") from exc
    if p.ndim != 1 or p.shape[0] != n_classes:
        raise BsvmValueError(
            f"priors must hold one value per class ({n_classes} classes), got shape {p.shape}."
        )
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise BsvmValueError(f"priors must be finite and strictly positive, got {p.tolist()}.")
    if abs(p.sum() - 1.0) > PRIORS_SUM_ATOL:
        raise BsvmValueError(f"priors must sum to 1, got sum {p.sum():.6g}.")
    return p / p.sum()


def _shifted_by_class(joint_log_likelihood: np.ndarray) -> np.ndarray:
    """Return jll' − max_k jll' as a (K, n) array (class-major: reductions over few rows are fast)."""
    by_class = np.array(joint_log_likelihood.T, order="C")
    by_class -= by_class.max(axis=0)
    return by_class


def log_posterior(joint_log_likelihood: np.ndarray) -> np.ndarray:
    """Normalise joint log-likelihoods into log p(k | x) (a log-softmax over classes)."""
    shifted = _shifted_by_class(joint_log_likelihood)
    shifted -= np.log(np.exp(shifted).sum(axis=0))
    return np.ascontiguousarray(shifted.T)


def posterior(joint_log_likelihood: np.ndarray) -> np.ndarray:
    """Bayes' rule p(k | x) = exp(jll_k) / Σ_j exp(jll_j) (a softmax over classes)."""
    weights = np.exp(_shifted_by_class(joint_log_likelihood))
    weights /= weights.sum(axis=0)
    return np.ascontiguousarray(weights.T)


class DiscriminantBase(ClassifierMixin, BaseEstimator):
    """Fit/predict scaffolding of the Gaussian discriminant classifiers (not public)."""

    def _validate_hyperparameters(self) -> None:
        """Raise BsvmValueError for a bad hyper-parameter (subclasses extend)."""

    def _fit_gaussians(
        self, residuals: np.ndarray, y_idx: np.ndarray, counts: np.ndarray, max_abs: float
    ) -> None:
        """Learn the class Gaussians from ``means_`` and within-class residuals.

        ``residuals`` are rows labelled by ``y_idx`` whose Gram matrix within class k is class k's
        centred scatter: the residuals x_i − μ_k themselves in ``fit``, their QR factors in
        ``fit_partitions`` (same Gram matrices, column norms and singular values). ``counts`` are
        the class sizes, ``max_abs`` = max |x| over the data.
        """
        raise NotImplementedError

    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """Return log pi_k + log N(x; mu_k, Sigma_k), up to a shared term, shape (n, K)."""
        raise NotImplementedError

    def fit(self, X: Any, y: Any) -> DiscriminantBase:
        """Fit the model to training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training vectors; finite numbers whose squares summed over the data fit in float64
            (``DataRangeError`` otherwise: rescale the features).
        y : array-like of shape (n_samples,)
            Class labels (ints, strings, ...); at least two classes.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_hyperparameters()
        X, y = check_fit_data(self, X, y)
        check_squares_finite(X)
        self.classes_, y_idx = encode_labels(y)
        counts = np.bincount(y_idx, minlength=self.classes_.shape[0])
        self.priors_ = resolve_priors(self.priors, counts)
        self.means_ = np.stack([X[y_idx == k].mean(axis=0) for k in range(counts.shape[0])])
        max_abs = max(float(X.max()), -float(X.min()))
        self._fit_gaussians(X - self.means_[y_idx], y_idx, counts, max_abs)
        return self

    def fit_partitions(self, parts: RowPartitions) -> DiscriminantBase:
        """Fit the model to data held as row partitions, in one pass; the same model as ``fit``.

        Each partition returns its class counts, means and centred scatter factors, combined by
        Chan's parallel update (``discriminant_sums``); only those cross the wire.

        Parameters
        ----------
        parts : RowPartitions
            The training rows and labels (``bsvm_core.partitions``), e.g. ``DaskPartitions``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_hyperparameters()
        try:
            moments = class_moments(parts)
            check_classification_targets(moments.classes)
        except BsvmValueError:
            raise
        except ValueError as err:
            raise BsvmValueError(str(err)) from err
        check_range(parts.n_rows, moments.n_features, moments.max_abs)
        if moments.classes.shape[0] < 2:
            raise BsvmValueError(
                f"y contains 1 class ({moments.classes[0]!r}); a classifier needs at least 2 "
                "classes."
            )
        self.n_features_in_ = moments.n_features
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.classes_ = moments.classes
        self.priors_ = resolve_priors(self.priors, moments.counts)
        self.means_ = moments.means
        sizes = [R.shape[0] for R in moments.factors]
        residuals = np.vstack(moments.factors)
        y_idx = np.repeat(np.arange(len(sizes)), sizes)
        self._fit_gaussians(residuals, y_idx, moments.counts, moments.max_abs)
        return self

    def _checked_jll(self, X: Any) -> np.ndarray:
        """Validate X against the fitted model and return its joint log-likelihoods."""
        check_is_fitted(self)
        return self._joint_log_likelihood(check_predict_data(self, X))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log posterior probabilities, log p(k | x).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        return log_posterior(self._checked_jll(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior probabilities p(k | x) by Bayes' rule.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one; columns follow ``classes_``.
        """
        return posterior(self._checked_jll(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Log posterior; for two classes the log-odds log p(1|x) - log p(0|x), as scikit-learn.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            Positive values (two classes) mean ``classes_[1]``; otherwise the column of the
            largest value is the predicted class.
        """
        jll = self._checked_jll(X)
        if jll.shape[1] == 2:
            return jll[:, 1] - jll[:, 0]
        return log_posterior(jll)

    def predict(self, X: Any) -> np.ndarray:
        """Predict the class of largest posterior probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels drawn from ``classes_``.
        """
        jll = self._checked_jll(X)
        return self.classes_[np.argmax(jll, axis=1)]
