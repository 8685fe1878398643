"""Every request body in the OpenAPI document has an example, and every example works."""

from __future__ import annotations

import pytest

from service.api.examples import TRAIN_CSV_QUERY
from service.model_types import model_types


@pytest.fixture(scope="module")
def doc(module_client) -> dict:
    """The OpenAPI document, read once (the tests that train do so on an app of their own)."""
    return module_client.get("/openapi.json").json()


def operations_with_a_body(doc: dict):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if "requestBody" in operation:
                yield path, method, operation


def resolve(doc: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_body_of_every_media_type_has_an_example(doc):
    found = []
    for path, method, operation in operations_with_a_body(doc):
        for media_type, media in operation["requestBody"]["content"].items():
            schema = resolve(doc, media.get("schema", {}))
            has = "example" in media or media.get("examples") or schema.get("examples")
            assert has, f"{method.upper()} {path} ({media_type}) has no example body"
            found.append((path, media_type))
    assert ("/train", "text/csv") in found and ("/predict", "application/json") in found


def test_train_has_one_example_per_model_type(doc):
    examples = doc["paths"]["/train"]["post"]["requestBody"]["content"]["application/json"][
        "examples"
    ]
    assert set(examples) == set(model_types())
    assert {e["value"]["model_type"] for e in examples.values()} == set(model_types())
    assert next(iter(examples)) == "kernel_svm"  # Swagger UI's default


def test_every_json_example_trains_and_predicts(client, doc):
    train = doc["paths"]["/train"]["post"]["requestBody"]["content"]["application/json"]
    for name, example in train["examples"].items():
        r = client.post("/train", json=example["value"])
        assert r.status_code == 201, (name, r.text)
        assert r.json()["model_type"] == name
    predict = doc["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"]
    for name, example in predict["examples"].items():
        r = client.post("/predict", json=example["value"])
        assert r.status_code == 200, (name, r.text)
        assert r.json()["predictions"] == ["setosa", "virginica"], name
    named = predict["examples"]["probabilities"]["value"]
    assert client.post("/predict", json=named).json()["dropped_columns"] == ["row_id"]


def query_examples(operation: dict) -> dict[str, str]:
    return {p["name"]: p["example"] for p in operation["parameters"] if "example" in p}


def test_the_csv_examples_train_and_predict(client, doc):
    for path, status in (("/train", 201), ("/predict", 200)):
        operation = doc["paths"][path]["post"]
        query = TRAIN_CSV_QUERY if path == "/train" else query_examples(operation)
        r = client.post(
            path,
            params=query,
            content=operation["requestBody"]["content"]["text/csv"]["example"],
            headers={"Content-Type": "text/csv"},
        )
        assert r.status_code == status, (path, r.text)
    assert r.json()["predictions"] == ["setosa", "virginica"]


def test_the_alias_body_example_is_valid(client, doc):
    operation = doc["paths"]["/models/by-name/{name}/aliases/{alias}"]["put"]
    schema = resolve(doc, operation["requestBody"]["content"]["application/json"]["schema"])
    client.post(
        "/train",
        json=doc["paths"]["/train"]["post"]["requestBody"]["content"]["application/json"][
            "examples"
        ]["lda"]["value"],
    )
    r = client.put("/models/by-name/iris-lda/aliases/stable", json=schema["examples"][0])
    assert r.status_code == 200, r.text
