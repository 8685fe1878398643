"""The record's metrics (numpy formulas) against scikit-learn's, on random and degenerate cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score

from service.model_types import model_types
from service.training.fitting import with_preprocessing
from service.training.metric_formulas import (
    class_indices,
    macro_ovr_auc,
    precision_recall_f1,
    roc_auc,
)
from service.training.metrics import classification_metrics


def sk_prf(y, pred, classes):
    """scikit-learn's precision, recall and F1 as the record averages them."""
    binary = len(classes) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p, r, f, _ = precision_recall_fscore_support(
            y,
            pred,
            labels=classes,
            average="binary" if binary else "macro",
            pos_label=classes[1] if binary else 1,
            zero_division=0,
        )
    return p, r, f


@pytest.mark.parametrize("seed", range(200))
def test_counts_metrics_equal_sklearn_on_random_labels(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    classes = np.sort(rng.choice(np.arange(-5, 50), size=k, replace=False))
    n = int(rng.integers(1, 40))
    # few distinct values: classes missing from y or from the predictions, all right, all wrong
    y = rng.choice(classes[: int(rng.integers(1, k + 1))], size=n)
    pred = y.copy() if seed % 7 == 0 else rng.choice(classes, size=n)
    true_i, pred_i = class_indices(classes, y), class_indices(classes, pred)
    ours = precision_recall_f1(true_i, pred_i, k, positive=1 if k == 2 else None)
    assert ours == pytest.approx(sk_prf(y, pred, classes), abs=1e-15)
    assert np.mean(true_i == pred_i) == pytest.approx(accuracy_score(y, pred), abs=1e-15)


def test_string_labels_and_labels_outside_the_classes():
    classes = np.array(["b", "c", "x"])
    assert class_indices(classes, np.array(["x", "b", "a", "zz", "c"])).tolist() == [
        2,
        0,
        -1,
        -1,
        1,
    ]


@pytest.mark.parametrize("seed", range(200))
def test_binary_auc_equals_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    positive = rng.random(n) < rng.uniform(0.05, 0.95)
    if positive.all() or not positive.any():
        positive[0] = not positive[0]
    levels = int(rng.integers(1, 6)) if seed % 2 else n  # many ties, or (almost) none
    scores = rng.integers(0, levels, size=n) + (positive * rng.uniform(0, 1.5))
    scores = np.round(scores, 1) if seed % 3 == 0 else scores
    assert roc_auc(positive, scores) == pytest.approx(roc_auc_score(positive, scores), abs=1e-12)


def test_auc_of_one_group_or_nan_scores_is_none():
    assert roc_auc(np.array([True, True]), np.array([0.1, 0.2])) is None
    assert roc_auc(np.array([True, False]), np.array([np.nan, 0.2])) is None
    assert roc_auc(np.array([True, False]), np.array([1.0, 1.0])) == 0.5


@pytest.mark.parametrize("seed", range(100))
def test_macro_ovr_auc_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 6))
    n = int(rng.integers(k, 50))
    y = np.concatenate([np.arange(k), rng.integers(0, k, size=n - k)])
    raw = rng.integers(1, 4, size=(n, k)).astype(float)  # ties within each column
    proba = raw / raw.sum(axis=1, keepdims=True)
    expected = roc_auc_score(y, proba, labels=np.arange(k), multi_class="ovr", average="macro")
    assert macro_ovr_auc(y, proba) == pytest.approx(expected, abs=1e-12)


def test_macro_ovr_auc_refuses_what_sklearn_refuses():
    y = np.array([0, 1, 2, 0])
    assert macro_ovr_auc(y, np.full((4, 3), 0.5)) is None  # rows do not sum to 1
    assert macro_ovr_auc(np.array([0, 1, 1, 0]), np.full((4, 3), 1 / 3)) is None  # class 2 absent


def sk_metrics(model, X, y):
    """The record's metrics as scikit-learn computes them (the service's former code)."""
    classes = model.classes_
    pred = model.predict(X)
    p, r, f = sk_prf(y, pred, classes)
    auc = None
    if classes.size == 2:
        auc = roc_auc_score(y == classes[1], model.decision_function(X))
    elif hasattr(model, "predict_proba"):
        auc = roc_auc_score(
            y, model.predict_proba(X), labels=classes, multi_class="ovr", average="macro"
        )
    return {"accuracy": accuracy_score(y, pred), "precision": p, "recall": r, "f1": f,
            "roc_auc": auc}  # fmt: skip


FAST = {"mcmc_svm": {"n_draws": 60, "burn_in": 20, "n_chains": 1}, "spike_slab_svm":
        {"n_draws": 60, "burn_in": 20, "n_chains": 1}, "kernel_svm": {"probability": True}}  # fmt: skip


@pytest.mark.parametrize("model_type", list(model_types()))
@pytest.mark.parametrize("dataset", ["cancer", "iris", "iris-binary"])
def test_every_model_type_scores_as_sklearn_and_predict(model_type, dataset):
    """Labels from the decision's sign are ``predict``'s, and the record's numbers sklearn's."""
    X, y = (load_breast_cancer if dataset == "cancer" else load_iris)(return_X_y=True)
    if dataset == "iris-binary":  # two overlapping classes: many rows near the boundary
        X, y = X[y > 0], np.where(y[y > 0] == 1, "versicolor", "virginica")
    spec = model_types()[model_type]
    params = {**FAST.get(model_type, {}), **({"random_state": 0} if "random_state" in
              spec.params_model.model_fields else {})}  # fmt: skip
    model = with_preprocessing(spec.make_estimator(params), spec.preprocess)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    ours = classification_metrics(model, X, y)
    expected = sk_metrics(model, X, y)
    for key, value in expected.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key
    if model.classes_.size == 2:
        assert np.array_equal(model.classes_[(model.decision_function(X) > 0).astype(int)],
                              model.predict(X))  # fmt: skip
