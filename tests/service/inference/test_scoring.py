"""``service.inference.scoring``: the scaling shortcut gives scikit-learn's pipeline output exactly."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from bsvm_core import LDA, BayesianSVM, KernelSVM, LinearSVM
from service.inference.scoring import scorer, standardize

METHODS = ("predict", "decision_function", "predict_proba")


def data(name: str) -> tuple[np.ndarray, np.ndarray]:
    X, y = (load_iris if name == "iris" else load_breast_cancer)(return_X_y=True)
    X = X.copy()
    X[:, 0] = 3.0  # a constant column: scale_ 1, as StandardScaler sets it
    return X, y


def estimators() -> list:
    return [
        LDA(),
        KernelSVM(probability=True, random_state=0),
        LinearSVM(probability=True, random_state=0),
        BayesianSVM(random_state=0),
    ]


@pytest.mark.parametrize("dataset", ["iris", "cancer"])
@pytest.mark.parametrize("index", range(4), ids=["lda", "kernel", "linear", "bayes"])
@pytest.mark.parametrize(
    "scaler",
    [StandardScaler(), StandardScaler(with_mean=False), StandardScaler(with_std=False)],
    ids=["both", "no-mean", "no-std"],
)
def test_a_scaled_pipeline_scores_exactly_as_sklearn(dataset, index, scaler):
    X, y = data(dataset)
    pipe = Pipeline([("scale", scaler), ("model", estimators()[index])]).fit(X[::2], y[::2])
    X_new = X[1::2]
    for method in METHODS:
        if not hasattr(pipe, method):
            continue
        for rows in (X_new, X_new[:1]):
            expected = getattr(pipe, method)(rows)
            np.testing.assert_array_equal(scorer(pipe, method)(rows), expected, strict=True)


def test_standardize_is_standard_scaler_transform_and_leaves_x_alone():
    X, _ = data("cancer")
    before = X.copy()
    for scaler in (StandardScaler(), StandardScaler(with_mean=False, with_std=False)):
        scaler.fit(X)
        out = standardize(X, scaler)
        np.testing.assert_array_equal(out, scaler.transform(X), strict=True)
        assert out is not X
    np.testing.assert_array_equal(X, before)


def test_other_estimators_are_called_as_they_are():
    X, y = data("iris")
    lda = LDA().fit(X, y)
    assert scorer(lda, "predict") == lda.predict
    pipe = Pipeline([("scale", MinMaxScaler()), ("model", LDA())]).fit(X, y)
    assert scorer(pipe, "predict") == pipe.predict
    chained = Pipeline([("a", StandardScaler()), ("b", "passthrough"), ("c", StandardScaler())])
    chained.steps.append(("model", LDA()))
    chained.fit(X, y)
    for method in METHODS:
        np.testing.assert_array_equal(
            scorer(chained, method)(X), getattr(chained, method)(X), strict=True
        )
