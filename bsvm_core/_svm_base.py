"""The shared body of the SVM classifiers: validation, multiclass decomposition, Platt probabilities.

A subclass supplies the binary learner (``_fit_binary`` / ``_decision_binary``); this base turns it
into a scikit-learn classifier for any number of classes and any label type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from joblib.parallel import get_active_backend
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_random_state

from ._validation import (
    check_fit_data_and_range,
    check_fitted,
    check_predict_data,
    encode_labels,
)
from .calibration import fit_platt, pairwise_coupling, platt_proba
from .exceptions import BsvmValueError
from .multiclass import REST, binary_problems, ovo_votes, problem_targets, two_class_targets

PLATT_FOLDS = 5
"""Internal cross-validation folds whose held-out decision values fit Platt's sigmoid."""


def _probability_enabled(estimator: Any) -> bool:
    """predict_proba exists only when the estimator was configured with probability=True."""
    if not getattr(estimator, "probability", False):
        raise AttributeError("predict_proba is available only with probability=True.")
    return True


def _sequential(n_jobs: int | None) -> bool:
    """Whether joblib would run the jobs one after another in this process: ``n_jobs`` 1, or None
    with no ``joblib.parallel_config`` giving another."""
    if n_jobs is None:
        n_jobs = get_active_backend()[1]
    return n_jobs is None or n_jobs == 1


def _platt_folds(y_pm: np.ndarray, seed: int) -> list[tuple[np.ndarray, int]]:
    """(test mask, seed) of each of ``PLATT_FOLDS`` stratified folds that has a fit to make.

    A fold is skipped when it is empty or its training rows hold one class only (too small to
    train on): its points keep the decision value 0 (no information).
    """
    rng = np.random.default_rng(seed)
    folds = np.empty(y_pm.shape[0], dtype=np.int64)
    for label in (-1.0, 1.0):
        where = np.flatnonzero(y_pm == label)
        folds[rng.permutation(where)] = np.arange(where.size) % PLATT_FOLDS
    out = []
    for k in range(PLATT_FOLDS):
        test = folds == k
        if test.any() and np.unique(y_pm[~test]).size == 2:
            out.append((test, seed + k + 1))
    return out


_SEED_BOUND = int(np.iinfo(np.int32).max)
"""Problems' seeds are drawn below it (made once: ``np.iinfo`` costs ~3 µs a call)."""


_SCALAR_SEEDS = 3
"""Seeds drawn one at a time up to this many (binary fits, three classes one-vs-one)."""


def _draw_seeds(rng: np.random.RandomState, k: int) -> list[int]:
    """k seeds below ``_SEED_BOUND``: one draw each, or one draw of k (the same numbers and state
    left); up to ``_SCALAR_SEEDS`` of them one at a time (a scalar draw ~1.5 µs, a draw of k
    ~5 µs)."""
    if k <= _SCALAR_SEEDS:
        return [rng.randint(_SEED_BOUND) for _ in range(k)]
    return rng.randint(_SEED_BOUND, size=k).tolist()


class SVMClassifierBase(ClassifierMixin, BaseEstimator):
    """Base class: binary SVM learner → multiclass classifier with optional Platt probabilities.

    Subclasses define ``_fit_binary(X, y_pm, seed)`` and ``_decision_binary(model, X)`` and may
    override ``_validate_params_extra``, ``_after_fit`` and ``_decision_matrix``.
    """

    _default_multiclass = "ovr"
    _binary_fit_takes_seed = True
    """Whether ``_fit_binary`` uses its seed: when not, and no Platt fold needs one, ``fit`` draws
    none (a scalar draw costs ~1.5-6 µs of a small fit)."""

    # -- hooks ---------------------------------------------------------------------------------
    def _validate_params_extra(self, X: np.ndarray) -> None:
        """Raise BsvmValueError for bad hyper-parameters; resolve X-dependent ones (extend)."""

    def _fit_jointly(self, X: np.ndarray, problems: list[tuple[np.ndarray, np.ndarray]]) -> Any:
        """Every problem's model at once ((row mask, ±1 targets) each), or None: one at a time."""
        return None

    def _fit_binary(self, X: np.ndarray, y_pm: np.ndarray, seed: int) -> Any:
        raise NotImplementedError

    def _decision_binary(self, model: Any, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _after_fit(self, X: np.ndarray, y_idx: np.ndarray) -> None:
        """Set public attributes from ``binary_models_``, X and encoded labels (extend)."""

    def _decision_matrix(self, X: np.ndarray) -> np.ndarray:
        """Decision values of every binary problem, shape (n_samples, n_problems)."""
        return np.column_stack([self._decision_binary(m, X) for m in self.binary_models_])

    # -- fitting -------------------------------------------------------------------------------
    def _check_common_params(self) -> None:
        C = getattr(self, "C", 1.0)
        if not isinstance(C, int | float | np.floating | np.integer) or not C > 0:
            raise BsvmValueError(f"C must be a positive number or inf, got {C!r}.")
        scheme = getattr(self, "multiclass", self._default_multiclass)
        if scheme not in ("ovo", "ovr"):
            raise BsvmValueError(f"multiclass must be 'ovo' or 'ovr', got {scheme!r}.")

    def fit(self, X: Any, y: Any) -> SVMClassifierBase:
        """Fit the classifier on X (n_samples, n_features) and labels y of any type; return self.

        The binary problems, and the Platt folds of each, are independent fits: they go through
        ``joblib.Parallel(n_jobs=self.n_jobs)`` (a lone one runs in this process), with the same
        seeds whatever ``n_jobs`` is.
        """
        X, y = check_fit_data_and_range(self, X, y)
        self._check_common_params()
        self._validate_params_extra(X)
        self.classes_, y_idx = encode_labels(y)
        rng = check_random_state(getattr(self, "random_state", None))
        scheme = getattr(self, "multiclass", self._default_multiclass)
        self.binary_problems_ = binary_problems(self.classes_.size, scheme)
        probability = bool(getattr(self, "probability", False))
        if self.classes_.size == 2:  # one problem of every row
            targets = [two_class_targets(y_idx)]
        else:
            members = y_idx == np.arange(self.classes_.size)[:, None]  # each class's rows, once
            targets = [problem_targets(y_idx, p, members) for p in self.binary_problems_]
        joint = self._fit_jointly(X, targets)
        # kept: through the loop below, 3-class joint fits cost +25-30k instructions (0.3-0.9 %)
        if joint is not None and not probability:  # every model made, no fold to fit, no seed
            self.binary_models_, self.platt_ = joint, None  # drawn (nothing takes them)
            self._after_fit(X, y_idx)
            return self
        # the same seeds as if drawn first: nothing above draws from rng
        k = len(self.binary_problems_)
        seeds = _draw_seeds(rng, k) if probability or self._binary_fit_takes_seed else [0] * k
        problems = [(mask, y_pm, seed) for (mask, y_pm), seed in zip(targets, seeds, strict=True)]
        folds = [_platt_folds(y_pm, seed) if probability else [] for _, y_pm, seed in problems]

        def jobs() -> Iterator[tuple[Callable[..., Any], tuple[Any, ...]]]:
            """(function, arguments) of each task; lazy: one problem's rows copied at a time."""
            for (mask, y_pm, seed), problem_folds in zip(problems, folds, strict=True):
                if joint is not None and not problem_folds:
                    continue
                Xp = X if y_pm.size == X.shape[0] else X[mask]  # one-vs-rest, binary: no copy
                if joint is None:
                    yield self._fit_binary, (Xp, y_pm, seed)
                for test, fold_seed in problem_folds:
                    yield self._held_out_decision, (Xp, y_pm, test, fold_seed)

        n_jobs = getattr(self, "n_jobs", None)
        n_tasks = (len(problems) if joint is None else 0) + sum(len(f) for f in folds)
        # in process: what joblib would do (without its set-up, ~0.25 ms a fit, nor ``delayed``'s
        # ~2 µs a task), and a lone task (a binary fit, or every problem solved jointly) gains
        # nothing from workers
        if n_tasks <= 1 or _sequential(n_jobs):
            results = iter([fn(*args) for fn, args in jobs()])
        else:
            results = iter(Parallel(n_jobs=n_jobs)(delayed(fn)(*args) for fn, args in jobs()))
        self.binary_models_, self.platt_ = [], [] if probability else None
        for p, ((_, y_pm, _), problem_folds) in enumerate(zip(problems, folds, strict=True)):
            self.binary_models_.append(next(results) if joint is None else joint[p])
            if self.platt_ is not None:
                f = np.zeros(y_pm.shape[0])  # points of a fold too small to train on keep f = 0
                for test, _ in problem_folds:
                    f[test] = next(results)
                self.platt_.append(fit_platt(f, y_pm))
        self._after_fit(X, y_idx)
        return self

    def _held_out_decision(
        self, X: np.ndarray, y_pm: np.ndarray, test: np.ndarray, seed: int
    ) -> np.ndarray:
        """Decision values on ``X[test]`` of the binary model fitted on the other rows."""
        train = ~test
        model = self._fit_binary(X[train], y_pm[train], seed)
        return self._decision_binary(model, X[test])

    # -- prediction ----------------------------------------------------------------------------
    def decision_function(self, X: Any) -> np.ndarray:
        """Binary: f(x) (n_samples,), > 0 means ``classes_[1]``. Multiclass: (n_samples, n_classes).

        One-vs-rest returns each class's own decision value; one-vs-one returns pairwise votes plus a
        confidence tie-breaker in (-1/3, 1/3) (see ``multiclass.ovo_votes``).
        """
        check_fitted(self, "binary_models_")
        X = check_predict_data(self, X)
        D = self._decision_matrix(X)
        if self.classes_.size == 2:
            return D[:, 0]
        if self.binary_problems_[0][1] == REST:
            return D
        return ovo_votes(D, self.binary_problems_, self.classes_.size)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels, shape (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    @available_if(_probability_enabled)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n_samples, n_classes) in ``classes_`` order; needs probability=True.

        Binary: Platt's sigmoid. One-vs-one: Platt per pair, coupled by Wu, Lin & Weng (2004)
        method 2 (libsvm's rule). One-vs-rest: Platt per class, normalised to sum to one.
        """
        check_fitted(self, "binary_models_")
        if self.platt_ is None:
            raise AttributeError(
                "predict_proba needs a model fitted with probability=True; refit with it set."
            )
        X = check_predict_data(self, X)
        D = self._decision_matrix(X)
        P = np.column_stack([platt_proba(D[:, c], a, b) for c, (a, b) in enumerate(self.platt_)])
        K = self.classes_.size
        if K == 2:
            return np.column_stack([1.0 - P[:, 0], P[:, 0]])
        if self.binary_problems_[0][1] == REST:
            P = np.clip(P, 1e-12, None)
            return P / P.sum(axis=1, keepdims=True)
        P = np.clip(P, 1e-7, 1 - 1e-7)
        r = np.zeros((X.shape[0], K, K))
        for c, (pos, neg) in enumerate(self.binary_problems_):
            r[:, pos, neg] = P[:, c]
            r[:, neg, pos] = 1.0 - P[:, c]
        return pairwise_coupling(r)

    @available_if(_probability_enabled)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of ``predict_proba``."""
        return np.log(self.predict_proba(X))
