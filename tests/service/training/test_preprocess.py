"""Preprocessing: a scaler stored with the model, defaults per model type."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bsvm_core import KernelSVM
from tests.service.conftest import train_body


def test_kernel_svm_is_standardised_by_default_and_predicts_raw_rows(client):
    X, y = load_breast_cancer(return_X_y=True)
    evaluation = {"test_fraction": 0.25, "random_state": 0}
    params = {"random_state": 0}
    scaled = client.post(
        "/train",
        json={**train_body(X, y, "kernel_svm"), "params": params, "evaluation": evaluation},
    ).json()
    raw = client.post(
        "/train",
        json={
            **train_body(X, y, "kernel_svm", name="raw"),
            "params": params,
            "evaluation": evaluation,
            "preprocess": "none",
        },
    ).json()
    assert scaled["preprocess"] == "standard" and raw["preprocess"] == "none"
    assert scaled["metrics"]["heldout"]["accuracy"] >= 0.95
    assert raw["metrics"]["heldout"]["accuracy"] < scaled["metrics"]["heldout"]["accuracy"]
    X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    reference = make_pipeline(StandardScaler(), KernelSVM(random_state=0)).fit(X_train, y_train)
    got = client.post(
        "/predict",
        json={"model": scaled["model_id"], "X": X_test.tolist(), "outputs": ["decision_function"]},
    ).json()
    np.testing.assert_allclose(
        got["decision_function"], reference.decision_function(X_test), atol=1e-6
    )


def test_defaults_per_model_type_and_bayesian_types_refuse_standard(client, iris):
    X, y = iris
    assert client.post("/train", json=train_body(X, y, "lda")).json()["preprocess"] == "none"
    body = {**train_body(X[:, :2], (y == y[0]).astype(int), "em_svm"), "preprocess": "standard"}
    r = client.post("/train", json=body)
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "preprocess"
