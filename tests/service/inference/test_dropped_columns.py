"""POST /predict leaves out the columns a model does not use (its target first) and lists them."""

from __future__ import annotations

import io

import numpy as np
import pytest

NAMES = ["sl", "sw", "pl", "pw"]


def to_csv(columns: dict[str, list]) -> str:
    out = io.StringIO()
    out.write(",".join(columns) + "\n")
    for row in zip(*columns.values(), strict=True):
        out.write(",".join(str(v) for v in row) + "\n")
    return out.getvalue()


@pytest.fixture()
def csv_model(client, iris) -> dict:
    X, y = iris
    columns = {name: X[:, j].tolist() for j, name in enumerate(NAMES)} | {"species": list(y)}
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "species", "name": "iris-csv"},
        content=to_csv(columns),
        headers={"Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    return r.json()


def predict_csv(client, columns: dict[str, list], **params):
    return client.post(
        "/predict",
        params={"model": "iris-csv", "outputs": ["label", "decision"], **params},
        content=to_csv(columns),
        headers={"Content-Type": "text/csv"},
    )


def test_the_record_knows_its_target_column(client, csv_model):
    assert csv_model["target"] == "species"
    assert client.get(f"/models/{csv_model['model_id']}").json()["target"] == "species"


def test_json_trained_models_have_no_target_unless_given(client, iris):
    X, y = iris
    body = {"model_type": "lda", "X": X.tolist(), "y": list(map(str, y))}
    assert client.post("/train", json=body).json()["target"] is None
    assert client.post("/train", json={**body, "target": "kind"}).json()["target"] == "kind"


def test_csv_with_the_target_column_ignores_it_and_says_so(client, iris, csv_model):
    X, y = iris
    features = {name: X[:, j].tolist() for j, name in enumerate(NAMES)}
    plain = predict_csv(client, features)
    assert plain.status_code == 200, plain.text
    assert plain.json()["dropped_columns"] == []
    # the target sits between the features and holds strings: it is neither parsed nor used
    with_target = {"sl": features["sl"], "species": list(y), **features}
    r = predict_csv(client, with_target)
    assert r.status_code == 200, r.text
    assert r.json()["dropped_columns"] == ["species"]
    assert r.json()["predictions"] == plain.json()["predictions"]
    assert r.json()["decision_function"] == plain.json()["decision_function"]


def test_other_extra_columns_are_dropped_and_listed_in_header_order(client, iris, csv_model):
    X, y = iris
    columns = {"id": list(range(len(y))), "note": ["x"] * len(y)}
    columns |= {name: X[:, j].tolist() for j, name in enumerate(NAMES)} | {"species": list(y)}
    r = predict_csv(client, columns)
    assert r.status_code == 200, r.text
    assert r.json()["dropped_columns"] == ["id", "note", "species"]
    assert np.mean(np.asarray(r.json()["predictions"]) == y) > 0.9


def test_a_used_column_that_is_not_numeric_is_still_422(client, iris, csv_model):
    X, _ = iris
    columns = {name: X[:5, j].tolist() for j, name in enumerate(NAMES)}
    columns["pl"] = ["big"] * 5
    r = predict_csv(client, columns)
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "X[0][2]"


def test_json_rows_with_feature_names_list_the_columns_left_out(client, iris, csv_model):
    X, _ = iris
    rows = np.column_stack([X[:3], np.arange(3)]).tolist()
    r = client.post(
        "/predict", json={"model": "iris-csv", "X": rows, "feature_names": [*NAMES, "row_id"]}
    )
    assert r.status_code == 200, r.text
    assert r.json()["dropped_columns"] == ["row_id"]
    plain = client.post("/predict", json={"model": "iris-csv", "X": X[:3].tolist()}).json()
    assert plain["dropped_columns"] == [] and plain["predictions"] == r.json()["predictions"]


def test_a_model_without_feature_names_drops_only_its_target(client, iris):
    X, y = iris
    body = {"model_type": "lda", "X": X.tolist(), "y": list(map(str, y)), "target": "t"}
    model = client.post("/train", json=body).json()["model_id"]
    rows = np.column_stack([X[:3], np.zeros(3)]).tolist()
    r = client.post(
        "/predict",
        json={"model": model, "X": rows, "feature_names": ["a", "b", "c", "d", "t"]},
    )
    assert r.status_code == 200, r.text
    assert r.json()["dropped_columns"] == ["t"]
