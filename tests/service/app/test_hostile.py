"""Hostile and odd inputs: each is a 4xx envelope naming the field and the problem, never a 500."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.service.api.test_errors import envelope
from tests.service.conftest import train_body

CSV = {"Content-Type": "text/csv"}
INT64_OVER = 2**63


@pytest.fixture(scope="module")
def client(module_client):
    """One app for the module: its tests are refused, or train models of four features."""
    return module_client


def only_detail(response, status: int = 422) -> dict:
    """The one detail of an error envelope with ``status``."""
    assert response.status_code == status, response.text
    body = envelope(response)
    assert len(body["details"]) == 1, body
    return body["details"][0]


@pytest.mark.parametrize("big", [INT64_OVER, -INT64_OVER - 1])
def test_labels_beyond_int64_are_422_on_y(client, iris, big):
    X, _ = iris
    response = client.post(
        "/train", json={"model_type": "lda", "X": X[:4].tolist(), "y": [big, 1, big, 1]}
    )
    problem = only_detail(response)
    assert problem["field"] == "y"
    assert "64 bits" in problem["problem"] and "strings" in problem["problem"]


def test_labels_at_the_int64_edges_are_accepted(client, iris):
    X, y = iris
    edges = np.where(y == y[0], 2**63 - 1, -(2**63)).tolist()
    response = client.post("/train", json={"model_type": "lda", "X": X.tolist(), "y": edges})
    assert response.status_code == 201, response.text
    assert sorted(response.json()["classes"]) == [-(2**63), 2**63 - 1]


def test_csv_params_nested_too_deep_is_422_on_params(client):
    deep = "[" * 5000 + "]" * 5000
    response = client.post(
        "/train",
        content=b"a,b,y\n1,2,0\n3,4,1\n",
        params={"model_type": "lda", "target": "y", "params": deep},
        headers=CSV,
    )
    assert only_detail(response)["field"] == "params"


def test_json_body_nested_too_deep_is_400_on_body(client):
    body = b'{"model_type": "lda", "X": ' + b"[" * 5000 + b"]" * 5000 + b', "y": [1, 2]}'
    response = client.post("/train", content=body, headers={"Content-Type": "application/json"})
    assert only_detail(response, 400)["field"] == "body"


def test_duplicated_csv_target_is_422_naming_it(client):
    response = client.post(
        "/train",
        content=b"a,b,y,y\n1,2,0,0\n3,4,1,1\n1,3,0,0\n3,3,1,1\n",
        params={"model_type": "lda", "target": "y"},
        headers=CSV,
    )
    problem = only_detail(response)
    assert problem["field"] == "target"
    assert "'y'" in problem["problem"] and "2 times" in problem["problem"]


@pytest.mark.parametrize(
    ("path", "query"),
    [("/train", {"model_type": "lda", "target": "y"}), ("/predict", {"model": "anything"})],
)
def test_duplicated_csv_feature_is_422_naming_it(client, path, query):
    response = client.post(path, content=b"a,b,a,y\n1,2,3,0\n3,4,5,1\n", params=query, headers=CSV)
    problem = only_detail(response)
    assert problem["field"] == "feature_names"
    assert "'a'" in problem["problem"] and "2 times" in problem["problem"]


@pytest.mark.parametrize(
    ("model_type", "params", "field"),
    [
        ("em_svm", {"nu": 1e-320}, "params.nu"),
        ("mcmc_svm", {"nu": 1e-101}, "params.nu"),
        ("ecme_svm", {"alpha": 1e-300}, "params.alpha"),
    ],
)
def test_degenerate_bayes_params_are_422(client, iris, model_type, params, field):
    X, y = iris
    body = train_body(X[:100], y[:100], model_type, params=params)
    problem = only_detail(client.post("/train", json=body))
    assert problem["field"] == field
    assert "greater than or equal to" in problem["problem"] and len(problem["problem"]) < 60


@pytest.mark.parametrize(
    ("model_type", "params"),
    [
        ("em_svm", {"nu": 1e-100, "alpha": 2.0}),
        ("ecme_svm", {"alpha": 0.1, "nu": 1e-100, "a_nu": 1e-100, "b_nu": 1e6}),
    ],
)
def test_bayes_params_at_their_bounds_train(client, iris, model_type, params):
    X, y = iris
    response = client.post("/train", json=train_body(X[:100], y[:100], model_type, params=params))
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("version", ["١", "true", "٣", "1e3", "0x1"])
def test_predict_with_a_non_ascii_or_word_version_is_422(client, iris, version):
    X, y = iris
    assert client.post("/train", json=train_body(X, y, name="m")).status_code == 201
    response = client.post("/predict", json={"model": f"m:{version}", "X": X[:2].tolist()})
    problem = only_detail(response)
    assert problem["field"] == "model"
    assert "1 to 999999999" in problem["problem"]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("OPTIONS", "/models/abc", "GET, DELETE"),
        ("PATCH", "/models/abc", "GET, DELETE"),
        ("OPTIONS", "/jobs/abc", "GET, DELETE"),
        ("PATCH", "/jobs/abc", "GET, DELETE"),
        ("DELETE", "/models", "GET"),
        ("GET", "/train", "POST"),
        ("GET", "/models/by-name/a/aliases/b", "PUT, DELETE"),
    ],
)
def test_405_allow_lists_every_method_of_the_path(client, method, path, allow):
    response = client.request(method, path)
    assert response.status_code == 405
    assert envelope(response)["code"] == "METHOD_NOT_ALLOWED"
    assert response.headers["allow"] == allow


def test_405_allow_equals_the_documented_allow(client):
    doc = client.get("/openapi.json").json()
    for template, item in doc["paths"].items():
        path = template.replace("{", "").replace("}", "")  # any value matches a path parameter
        documented = {
            op["responses"]["405"]["headers"]["Allow"]["schema"]["const"] for op in item.values()
        }
        assert len(documented) == 1, template
        response = client.request("TRACE", path)
        assert response.status_code == 405, template
        assert response.headers["allow"] == documented.pop(), template


@pytest.mark.parametrize(
    ("body", "field", "problem"),
    [
        ({"X": [], "y": []}, "X", "must hold at least one row"),
        ({"X": [[]], "y": [1]}, "X[0]", "rows must hold at least one value"),
        ({"X": [[1.0]], "y": []}, "y", "must not be empty"),
    ],
)
def test_empty_train_bodies_are_refused_by_the_schema(client, body, field, problem):
    response = client.post("/train", json={"model_type": "lda", **body})
    details = envelope(response)["details"]
    assert response.status_code == 422
    assert {"field": field, "problem": problem} in details


def test_empty_predict_rows_are_refused_by_the_schema(client):
    response = client.post("/predict", json={"model": "m", "X": []})
    assert only_detail(response) == {"field": "X", "problem": "must hold at least one row"}


def test_document_states_the_minimum_rows(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    predict = schemas["PredictRequest"]["properties"]
    assert predict["X"]["minItems"] == 1 and predict["X"]["items"]["minItems"] == 1
    train = schemas["LdaTrainRequest"]["properties"]
    for name in ("X", "y"):  # optional (data may come in their place), never empty when given
        (given,) = [kind for kind in train[name]["anyOf"] if kind.get("type") == "array"]
        assert given["minItems"] == 1


def test_alias_version_bound_is_the_registry_bound(client, iris):
    from service.schemas.models import MAX_VERSION
    from service.schemas.names import VERSION_PATTERN

    assert re.fullmatch(VERSION_PATTERN, str(MAX_VERSION))
    assert not re.fullmatch(VERSION_PATTERN, str(MAX_VERSION + 1))
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["AliasUpdate"]["properties"]["version"]["maximum"] == MAX_VERSION
    X, y = iris
    assert client.post("/train", json=train_body(X, y, name="m")).status_code == 201
    over = client.put("/models/by-name/m/aliases/stable", json={"version": MAX_VERSION + 1})
    assert only_detail(over)["field"] == "version"
    at = client.put("/models/by-name/m/aliases/stable", json={"version": MAX_VERSION})
    assert at.status_code == 404  # a well-formed version that does not exist
