"""Models by reference on every route, versions, aliases, filters, tags, signature, name schema."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_breast_cancer

from tests.service.conftest import train_body

NAMES = ["sl", "sw", "pl", "pw"]


@pytest.fixture()
def versions(client, iris) -> list[dict]:
    X, y = iris
    out = []
    for i in range(3):
        body = train_body(X, y, name="iris", feature_names=NAMES, tags={"team": f"t{i % 2}"})
        r = client.post("/train", json={**body, "description": f"version {i + 1}"})
        assert r.status_code == 201, r.text
        out.append(r.json())
    client.put("/models/by-name/iris/aliases/stable", json={"version": 1})
    client.put("/models/by-name/iris/aliases/canary", json={"version": 3})
    return out


@pytest.mark.parametrize(
    ("ref", "index"), [("iris", 2), ("iris:2", 1), ("iris@stable", 0), ("iris@canary", 2)]
)
def test_model_routes_take_references(client, versions, ref, index):
    record = client.get(f"/models/{ref}").json()
    assert record["model_id"] == versions[index]["model_id"]
    assert record["version"] == index + 1


def test_delete_by_reference(client, versions):
    assert client.delete("/models/iris@stable").status_code == 204
    assert client.get(f"/models/{versions[0]['model_id']}").status_code == 404
    assert client.get("/models/iris@stable").status_code == 404  # its alias went with it
    assert client.get("/models/iris").json()["version"] == 3


def test_versions_route_lists_every_version(client, versions):
    listed = client.get("/models/iris/versions").json()
    assert listed["total"] == 3 and [m["version"] for m in listed["items"]] == [3, 2, 1]
    assert client.get("/models/nobody/versions").status_code == 404


def test_aliases_are_listed_and_deleted(client, versions):
    assert client.get("/models/by-name/iris/aliases").json() == {
        "name": "iris",
        "aliases": {"canary": 3, "stable": 1},
    }
    assert client.delete("/models/by-name/iris/aliases/canary").status_code == 204
    assert client.get("/models/by-name/iris/aliases").json()["aliases"] == {"stable": 1}
    assert client.delete("/models/by-name/iris/aliases/canary").status_code == 404
    assert client.get("/models/iris").json()["version"] == 3  # the version stays


def test_list_filters_by_type_alias_and_tag(client, versions, iris):
    X, y = iris
    client.post("/train", json=train_body(X, y, "qda", name="other"))
    assert client.get("/models", params={"model_type": "qda"}).json()["total"] == 1
    assert client.get("/models", params={"model_type": "lda"}).json()["total"] == 3
    stable = client.get("/models", params={"alias": "stable"}).json()
    assert [m["version"] for m in stable["items"]] == [1]
    assert client.get("/models", params={"tag": "team"}).json()["total"] == 3
    assert client.get("/models", params={"tag": "team=t1"}).json()["total"] == 1
    assert client.get("/models", params={"tag": "team=t9"}).json()["total"] == 0


def test_record_has_tags_description_and_signature(client, versions):
    record = client.get("/models/iris:2").json()
    assert record["tags"] == {"team": "t1"} and record["description"] == "version 2"
    assert record["signature"]["inputs"] == [{"name": n, "type": "double"} for n in NAMES]
    assert record["signature"]["outputs"] == {
        "classes": ["setosa", "versicolor", "virginica"],
        "label_type": "string",
    }


def test_a_name_keeps_its_model_type_and_features(client, versions, iris):
    X, y = iris
    other_type = client.post(
        "/train", json=train_body(X, y, "qda", name="iris", feature_names=NAMES)
    )
    assert other_type.status_code == 409 and other_type.json()["code"] == "NAME_SCHEMA_CONFLICT"
    assert "lda" in other_type.json()["error"] and "replace_schema" in other_type.json()["error"]
    fewer = client.post("/train", json=train_body(X[:, :3], y, name="iris"))
    assert fewer.status_code == 409 and fewer.json()["details"][0]["field"] == "name"
    allowed = {**train_body(X, y, "qda", name="iris"), "replace_schema": True}
    assert client.post("/train", json=allowed).json()["version"] == 4
    assert client.post("/train", json=train_body(X, y, "qda", name="iris")).status_code == 201


def test_em_summaries_say_mode(client):
    X, y = load_breast_cancer(return_X_y=True)
    model = client.post("/train", json=train_body(X[:, :3], y, "em_svm")).json()
    rows = client.get(f"/models/{model['model_id']}/posterior").json()["coefficients"]
    assert all(row["mode"] is not None and row.get("mean") is None for row in rows)
    assert all(row.get("lower") is None and row.get("sd") is None for row in rows)


def test_outputs_named_as_the_response_keys_and_the_old_names_still_work(client, versions, iris):
    X, _ = iris
    new = {"model": "iris", "X": X[:3].tolist(), "outputs": ["predictions", "decision_function"]}
    old = {**new, "outputs": ["label", "decision"]}
    a, b = client.post("/predict", json=new).json(), client.post("/predict", json=old).json()
    assert a == b and a["predictions"] and a["decision_function"]
    doc = client.get("/openapi.json").json()
    outputs = doc["components"]["schemas"]["PredictRequest"]["properties"]["outputs"]
    assert outputs["x-deprecated-values"] == ["decision", "interval", "label", "probability"]
