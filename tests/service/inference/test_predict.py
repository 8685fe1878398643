"""POST /predict: model references, outputs, CSV, and every error status."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from bsvm_core.lda import LDA
from tests.service.conftest import train_body


@pytest.fixture(scope="module")
def client(module_client):
    """One app for the module: its tests predict, or train models of their own (the one that
    trains a second ``iris`` has an app of its own)."""
    return module_client


@pytest.fixture(scope="module")
def iris_model(client, iris) -> dict:
    """``train_iris``, once for the module."""
    return train_iris(client, iris)


def train_iris(client, iris) -> dict:
    """LDA on iris named ``iris``, with feature names."""
    X, y = iris
    names = ["sl", "sw", "pl", "pw"]
    r = client.post("/train", json=train_body(X, y, name="iris", feature_names=names))
    assert r.status_code == 201
    return r.json()


def test_outputs_match_the_estimator_fitted_in_process(client, iris, iris_model):
    X, y = iris
    body = {"model": iris_model["model_id"], "X": X.tolist(), "outputs": ["label", "probability"]}
    out = client.post("/predict", json=body).json()
    assert out["classes"] == ["setosa", "versicolor", "virginica"]
    assert out["predictions"] == LinearDiscriminantAnalysis().fit(X, y).predict(X).tolist()
    local = LDA().fit(X, y)
    np.testing.assert_allclose(out["probabilities"], local.predict_proba(X), rtol=0, atol=1e-12)
    assert out["decision_function"] is None and out["intervals"] is None


def test_default_output_is_the_label(client, iris, iris_model):
    X, _ = iris
    out = client.post("/predict", json={"model": "iris", "X": X[:3].tolist()}).json()
    assert out["predictions"] == ["setosa"] * 3 and out["probabilities"] is None


def test_decision_has_one_column_per_class(client, iris, iris_model):
    X, _ = iris
    out = client.post(
        "/predict", json={"model": "iris", "X": X[:5].tolist(), "outputs": ["decision"]}
    ).json()
    assert np.asarray(out["decision_function"]).shape == (5, 3)


def test_every_reference_form_resolves(make_client, iris):
    client = make_client()  # an app of its own: a second version of iris would move the others'
    iris_model = train_iris(client, iris)
    X, y = iris
    names = ["sl", "sw", "pl", "pw"]
    second = client.post("/train", json=train_body(X, y, name="iris", feature_names=names)).json()
    client.put("/models/by-name/iris/aliases/stable", json={"version": 1})
    expected = {
        iris_model["model_id"]: iris_model["model_id"],
        "iris": second["model_id"],
        "iris:1": iris_model["model_id"],
        "iris:2": second["model_id"],
        "iris@stable": iris_model["model_id"],
    }
    for ref, model_id in expected.items():
        out = client.post("/predict", json={"model": ref, "X": X[:1].tolist()}).json()
        assert out["model_id"] == model_id, ref


def test_csv_columns_are_put_in_the_model_order(client, iris, iris_model):
    X, _ = iris
    order = [2, 0, 3, 1]
    names = np.array(["sl", "sw", "pl", "pw"])[order]
    lines = [",".join(names)] + [",".join(map(repr, row)) for row in X[:, order].tolist()]
    r = client.post(
        "/predict",
        params={"model": "iris", "outputs": ["label", "probability"]},
        content="\n".join(lines) + "\n",
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 200, r.text
    direct = client.post(
        "/predict", json={"model": "iris", "X": X.tolist(), "outputs": ["label", "probability"]}
    ).json()
    assert r.json()["predictions"] == direct["predictions"]
    assert r.json()["probabilities"] == direct["probabilities"]


def test_interval_on_a_non_bayesian_model_is_409(client, iris, iris_model):
    X, _ = iris
    r = client.post(
        "/predict", json={"model": "iris", "X": X[:1].tolist(), "outputs": ["interval"]}
    )
    assert r.status_code == 409 and "posterior draws" in r.json()["error"]


def test_probability_without_probabilities_is_409(client, iris):
    X, y = iris
    r = client.post("/train", json=train_body(X, y, "kernel_svm", params={"probability": False}))
    assert r.status_code == 201, r.json()
    out = client.post(
        "/predict",
        json={"model": r.json()["model_id"], "X": X[:1].tolist(), "outputs": ["probability"]},
    )
    assert out.status_code == 409 and "without probability=true" in out.json()["error"]


def test_probability_of_a_bayesian_model_is_409_with_its_reason(client):
    X, y = load_breast_cancer(return_X_y=True)
    r = client.post(
        "/train", json={"model_type": "em_svm", "X": X[:, :3].tolist(), "y": y.tolist()}
    )
    body = {"model": r.json()["model_id"], "X": X[:1, :3].tolist(), "outputs": ["probability"]}
    out = client.post("/predict", json=body)
    assert out.status_code == 409 and "not probabilities" in out.json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"model": "iris", "X": [[1.0, 2.0, 3.0]]}, 422, "X"),
        ({"model": "iris", "X": [[1.0, 2.0, 3.0, 4.0], [1.0]]}, 422, "X[1]"),
        ({"model": "iris", "X": []}, 422, "X"),
        ({"model": "iris", "X": [[1.0, 2.0, 3.0, 4.0]], "outputs": ["nope"]}, 422, "outputs"),
        ({"model": "../../etc/passwd", "X": [[1.0, 2.0, 3.0, 4.0]]}, 422, "model"),
        ({"model": "iris:abc", "X": [[1.0, 2.0, 3.0, 4.0]]}, 422, "model"),
        ({"model": "x" * 200, "X": [[1.0, 2.0, 3.0, 4.0]]}, 422, "model"),
        ({"model": "unknown", "X": [[1.0, 2.0, 3.0, 4.0]]}, 404, None),
        ({"model": "iris:7", "X": [[1.0, 2.0, 3.0, 4.0]]}, 404, None),
        ({"model": "iris@nope", "X": [[1.0, 2.0, 3.0, 4.0]]}, 404, None),
        ({"model": "m_" + "0" * 32, "X": [[1.0, 2.0, 3.0, 4.0]]}, 404, None),
    ],
)
def test_bad_predict_requests(client, iris_model, body, status, field):
    r = client.post("/predict", json=body)
    assert r.status_code == status, r.text
    if field is not None:
        assert any(d["field"].startswith(field) for d in r.json()["details"]), r.json()


def test_nan_and_too_many_rows_are_422(make_client, iris):
    X, y = iris
    client = make_client(max_rows=200)
    client.post("/train", json=train_body(X, y, name="iris"))
    csv_text = "sl,sw,pl,pw\n1,2,nan,4\n"
    r = client.post(
        "/predict", params={"model": "iris"}, content=csv_text, headers={"content-type": "text/csv"}
    )
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "X[0][2]"
    r = client.post("/predict", json={"model": "iris", "X": [[1.0] * 4] * 201})
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "X"


def test_csv_with_unknown_columns_is_422(client, iris_model):
    r = client.post(
        "/predict",
        params={"model": "iris"},
        content="a,b,c,d\n1,2,3,4\n",
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "feature_names"


def test_interval_of_an_mcmc_model_brackets_its_draws(client):
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :3]
    params = {"n_draws": 200, "burn_in": 50, "n_chains": 2, "random_state": 0}
    r = client.post(
        "/train",
        json={"model_type": "mcmc_svm", "X": X.tolist(), "y": y.tolist(), "params": params},
    )
    assert r.status_code == 201, r.json()
    body = {
        "model": r.json()["model_id"],
        "X": X[:20].tolist(),
        "outputs": ["decision", "interval"],
        "level": 0.9,
    }
    out = client.post("/predict", json=body).json()
    lower, upper = np.asarray(out["intervals"]["lower"]), np.asarray(out["intervals"]["upper"])
    assert out["intervals"]["level"] == 0.9 and lower.shape == (20,)
    assert np.all(lower < upper)
    model = client.app.state.store.load(r.json()["model_id"])
    draws = X[:20] @ model.coef_draws_.reshape(-1, 3).T + model.intercept_draws_.reshape(-1)
    np.testing.assert_allclose(lower, np.quantile(draws, 0.05, axis=1), rtol=1e-6, atol=1e-6)


def test_interval_of_an_em_model_is_409(client):
    X, y = load_breast_cancer(return_X_y=True)
    r = client.post(
        "/train", json={"model_type": "em_svm", "X": X[:, :3].tolist(), "y": y.tolist()}
    )
    assert r.status_code == 201, r.json()
    body = {"model": r.json()["model_id"], "X": X[:2, :3].tolist(), "outputs": ["interval"]}
    out = client.post("/predict", json=body)
    assert out.status_code == 409 and "draws" in out.json()["error"]
