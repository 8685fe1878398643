"""Other servers' formats: MLflow and KServe V1 bodies, the Open Inference Protocol, CSV answers.

Request bodies are the ones those projects document, copied from:

- MLflow: ``mlflow models serve --help`` (the docstring of ``mlflow/models/cli.py``, MLflow 2.x),
  and https://mlflow.org/docs/latest/ml/deployment/deploy-model-locally (``{"inputs": ...}``).
- KServe V1: the sklearn iris sample input of KServe's docs (``{"instances": [...]}``).
- KServe V2: the iris ``input-0`` request of KServe's V2 model-serving docs, and the ``"id": "42"``
  request of the Open Inference Protocol's REST spec
  (github.com/kserve/open-inference-protocol, specification/protocol/inference_rest.md).
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

# MLflow (mlflow models serve --help): columns "a" and "b".
MLFLOW_RECORDS = {"dataframe_records": [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]}
MLFLOW_SPLIT = {
    "dataframe_split": {"columns": ["a", "b"], "index": [0, 1, 2], "data": [[1, 2], [3, 4], [5, 6]]}
}
MLFLOW_INPUTS = {"inputs": [[1, 2], [3, 4], [5, 6]]}
MLFLOW_TENSOR_INSTANCES = {
    "instances": [
        {"a": "t1", "b": [1, 2, 3]},
        {"a": "t2", "b": [4, 5, 6]},
        {"a": "t3", "b": [7, 8, 9]},
    ]
}
AB_ROWS = [[1, 2], [3, 4], [5, 6]]
# KServe's sklearn iris examples (V1 and V2).
IRIS_ROWS = [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]
KSERVE_V1 = {"instances": IRIS_ROWS}
KSERVE_V2 = {
    "inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP32", "data": IRIS_ROWS}]
}
IRIS_NAMES = ["sl", "sw", "pl", "pw"]


@pytest.fixture(scope="module")
def client(module_client):
    """One app for the module: its tests predict, or train under names of their own (the one that
    trains a second ``iris`` has an app of its own)."""
    return module_client


@pytest.fixture(scope="module")
def models(client, iris) -> dict:
    """``ab`` and ``iris`` (``train_models``), trained once for the module."""
    return train_models(client, iris)


def train_models(client, iris) -> dict:
    """``ab``: LDA on iris' first two columns named a, b; ``iris``: LDA on all four."""
    X, y = iris
    ab = {"model_type": "lda", "name": "ab", "X": X[:, :2].tolist(), "y": y.tolist()}
    ab["feature_names"] = ["a", "b"]
    full = {"model_type": "lda", "name": "iris", "X": X.tolist(), "y": y.tolist()}
    full["feature_names"] = IRIS_NAMES
    out = {}
    for body in (ab, full):
        r = client.post("/train", json=body)
        assert r.status_code == 201, r.text
        out[body["name"]] = r.json()
    return out


def ours(client, model: str, rows, outputs=("label",)) -> dict:
    r = client.post("/predict", json={"model": model, "X": rows, "outputs": list(outputs)})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("body", [MLFLOW_RECORDS, MLFLOW_SPLIT, MLFLOW_INPUTS])
@pytest.mark.parametrize("path", ["/predict", "/invocations"])
def test_mlflow_documented_bodies_answer_our_labels(client, models, body, path):
    r = client.post(path, params={"model": "ab"}, json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"predictions": ours(client, "ab", AB_ROWS)["predictions"]}


@pytest.mark.parametrize(
    "body",
    [
        {"dataframe_split": {"columns": ["b", "a"], "data": [[2, 1], [4, 3], [6, 5]]}},
        {"dataframe_records": [{"b": 2, "a": 1}, {"b": 4, "a": 3}, {"b": 6, "a": 5}]},
        {"instances": [{"b": 2, "a": 1}, {"b": 4, "a": 3}, {"b": 6, "a": 5}]},
        {"inputs": {"b": [2, 4, 6], "a": [1, 3, 5]}},
    ],
)
def test_named_columns_are_put_in_the_model_order(client, models, body):
    r = client.post("/predict", params={"model": "ab"}, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["predictions"] == ours(client, "ab", AB_ROWS)["predictions"]


@pytest.mark.parametrize("path", ["/v1/models/iris:predict", "/predict?model=iris"])
def test_kserve_v1_instances(client, models, path):
    r = client.post(path, json=KSERVE_V1)
    assert r.status_code == 200, r.text
    assert r.json() == {"predictions": ours(client, "iris", IRIS_ROWS)["predictions"]}


def _tensors(response: dict) -> dict:
    return {t["name"]: t for t in response["outputs"]}


@pytest.mark.parametrize(
    "path", ["/v2/models/iris/infer", "/v2/models/iris/versions/1/infer", "/predict?model=iris"]
)
def test_v2_infer_gives_every_output_equal_to_predict(client, models, path):
    r = client.post(path, json=KSERVE_V2)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["model_name"], body["model_version"]) == ("iris", "1")
    assert body["id"] == r.headers["X-Request-ID"]
    want = ours(client, "iris", IRIS_ROWS, ("label", "decision", "probability"))
    out = _tensors(body)
    assert out["label"] == {
        "name": "label",
        "shape": [2],
        "datatype": "BYTES",
        "data": want["predictions"],
    }
    for name, key in (("decision", "decision_function"), ("probability", "probabilities")):
        assert out[name]["shape"] == [2, 3] and out[name]["datatype"] == "FP64"
        assert out[name]["data"] == np.ravel(want[key]).tolist()
        assert json.loads(out[name]["parameters"]["classes"]) == want["classes"]


def test_v2_spec_example_id_and_requested_outputs(client, models):
    # The OIP spec's request carries "id": "42" and asks for one output by name.
    body = {**KSERVE_V2, "id": "42", "outputs": [{"name": "probability"}]}
    r = client.post("/v2/models/iris/infer", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "42"
    assert [t["name"] for t in r.json()["outputs"]] == ["probability"]


def test_v2_flat_data_and_one_tensor_per_feature(client, models):
    flat = {"inputs": [{**KSERVE_V2["inputs"][0], "data": np.ravel(IRIS_ROWS).tolist()}]}
    columns = np.asarray(IRIS_ROWS).T.tolist()
    per_feature = {
        "inputs": [
            {"name": IRIS_NAMES[j], "shape": [2, 1], "datatype": "FP64", "data": columns[j]}
            for j in (3, 1, 0, 2)
        ]
    }
    want = ours(client, "iris", IRIS_ROWS)["predictions"]
    for body in (flat, per_feature):
        r = client.post("/v2/models/iris/infer", json=body)
        assert r.status_code == 200, r.text
        assert _tensors(r.json())["label"]["data"] == want


def test_v2_integer_labels_are_int64_and_binary_decision_one_column(client, iris):
    X, y = iris
    keep = y != "setosa"
    labels = (y[keep] == "virginica").astype(int).tolist()
    r = client.post(
        "/train", json={"model_type": "lda", "name": "bin", "X": X[keep].tolist(), "y": labels}
    )
    assert r.status_code == 201, r.text
    out = _tensors(client.post("/v2/models/bin/infer", json=KSERVE_V2).json())
    want = ours(client, "bin", IRIS_ROWS, ("label", "decision"))
    assert out["label"]["datatype"] == "INT64" and out["label"]["data"] == want["predictions"]
    assert out["decision"]["shape"] == [2] and out["decision"]["data"] == want["decision_function"]
    meta = client.get("/v2/models/bin").json()
    assert {t["name"]: t["shape"] for t in meta["outputs"]}["decision"] == [-1]


def test_v2_metadata_ready_and_health(make_client, iris):
    client = make_client()  # an app of its own: a second version of iris would move the others'
    train_models(client, iris)
    X, y = iris
    second = {"model_type": "lda", "name": "iris", "X": X.tolist(), "y": y.tolist()}
    assert client.post("/train", json={**second, "feature_names": IRIS_NAMES}).status_code == 201
    meta = client.get("/v2/models/iris").json()
    assert meta["name"] == "iris" and meta["versions"] == ["1", "2"] and meta["platform"] == "bsvm"
    assert meta["inputs"] == [{"name": "input-0", "datatype": "FP64", "shape": [-1, 4]}]
    assert [t["name"] for t in meta["outputs"]] == ["label", "decision", "probability"]
    assert client.get("/v2/models/iris/versions/1").json()["versions"] == ["1", "2"]
    assert client.get("/v2/models/iris/ready").json() == {"name": "iris", "ready": True}
    assert client.get("/v2/models/iris/versions/2/ready").json()["ready"] is True
    assert client.get("/v2/health/live").json() == {"live": True}
    assert client.get("/v2/health/ready").json()["ready"] is True
    server = client.get("/v2").json()
    assert server["name"] == "bsvm" and server["extensions"] == ["binary_tensor_data"]
    missing = client.get("/v2/models/nope/ready")
    assert missing.status_code == 404 and "error" in missing.json()


def test_v2_health_is_open_and_the_rest_needs_the_key(make_client):
    client = make_client(api_keys="k1")
    assert client.get("/v2/health/live").status_code == 200
    assert client.get("/v2/health/ready").status_code == 200
    assert client.get("/v2").status_code == 401
    assert client.post("/v2/models/x/infer", json=KSERVE_V2).status_code == 401
    assert client.post("/invocations?model=x", json=MLFLOW_INPUTS).status_code == 401


def _parse_csv(text: str) -> tuple[list[str], list[list[str]]]:
    table = list(csv.reader(io.StringIO(text)))
    return table[0], table[1:]


def test_accept_csv_equals_the_json_outputs(client, models, iris):
    X, _ = iris
    rows = X[::10].tolist()
    outputs = ["label", "decision", "probability"]
    body = {"model": "iris", "X": rows, "outputs": outputs}
    r = client.post("/predict", json=body, headers={"Accept": "text/csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    header, table = _parse_csv(r.text)
    want = ours(client, "iris", rows, outputs)
    classes = want["classes"]
    assert header == (
        ["label"] + [f"decision_{c}" for c in classes] + [f"probability_{c}" for c in classes]
    )
    assert [row[0] for row in table] == want["predictions"]
    numbers = [[float(v) for v in row[1:]] for row in table]
    assert numbers == [
        d + p for d, p in zip(want["decision_function"], want["probabilities"], strict=True)
    ]
    assert r.headers["X-Model-ID"] == models["iris"]["model_id"]


def test_accept_csv_for_a_binary_model_and_json_preferred_by_q(client, iris):
    X, y = iris
    keep = y != "setosa"
    r = client.post(
        "/train", json={"model_type": "lda", "X": X[keep].tolist(), "y": y[keep].tolist()}
    )
    model = r.json()["model_id"]
    body = {"model": model, "X": X[keep][:5].tolist(), "outputs": ["decision"]}
    csv_r = client.post("/predict", json=body, headers={"Accept": "text/csv"})
    header, table = _parse_csv(csv_r.text)
    assert header == ["decision_virginica"]
    assert [float(row[0]) for row in table] == ours(client, model, body["X"], ["decision"])[
        "decision_function"
    ]
    prefers_json = client.post(
        "/predict", json=body, headers={"Accept": "text/csv;q=0.5, application/json"}
    )
    assert prefers_json.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        # MLflow's documented tensor-of-strings instances: not numbers.
        ("/predict?model=ab", MLFLOW_TENSOR_INSTANCES, "instances[0].a"),
        (
            "/predict?model=ab",
            {"dataframe_split": {"columns": ["a", "b"], "data": [[1, "x"]]}},
            "dataframe_split.data[0][1]",
        ),
        (
            "/predict?model=ab",
            {"dataframe_split": {"columns": ["a", "c"], "data": [[1, 2]]}},
            "dataframe_split.columns",
        ),
        (
            "/predict?model=ab",
            {"dataframe_split": {"columns": ["a"], "data": [[1, 2]]}},
            "dataframe_split.data[0]",
        ),
        (
            "/predict?model=ab",
            {"dataframe_records": [{"a": 1, "b": 2}, {"a": 3}]},
            "dataframe_records[1]",
        ),
        ("/predict?model=ab", {"instances": [[1, 2, 3]]}, "instances"),
        ("/predict?model=ab", {"inputs": [[1, 2]], "instances": [[1, 2]]}, "body"),
        ("/predict?model=ab", {"inputs": [[1, 2]], "params": {"x": 1}}, "params"),
        ("/predict", MLFLOW_INPUTS, "model"),
        ("/predict?model=ab", {"inputs": [[10**400, 1]]}, "inputs[0][0]"),
        ("/invocations", MLFLOW_INPUTS, "model"),
        ("/invocations?model=ab", {"X": [[1, 2]]}, "body"),
        (
            "/v2/models/iris/infer",
            {"inputs": [{**KSERVE_V2["inputs"][0], "datatype": "BYTES"}]},
            "inputs[0].datatype",
        ),
        (
            "/v2/models/iris/infer",
            {"inputs": [{**KSERVE_V2["inputs"][0], "shape": [3, 4]}]},
            "inputs[0].data",
        ),
        (
            "/v2/models/iris/infer",
            {"inputs": [{**KSERVE_V2["inputs"][0], "shape": [8]}]},
            "inputs[0].shape",
        ),
        (
            "/v2/models/iris/infer",
            {"inputs": [{**KSERVE_V2["inputs"][0], "shape": [2, 2], "data": [1, 2, 3, 4]}]},
            "inputs[0].data",
        ),
        ("/v2/models/iris/infer", {**KSERVE_V2, "outputs": [{"name": "nope"}]}, "outputs[0].name"),
        ("/v2/models/iris/infer", {"outputs": []}, "inputs"),
        ("/v2/models/iris:x/infer", KSERVE_V2, "name"),
    ],
)
def test_bad_bodies_are_422_naming_the_field(client, models, path, body, field):
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert field in [d["field"] for d in r.json()["details"]], r.json()


def test_rows_beyond_the_bound_are_refused_naming_the_field(make_client, iris):
    X, y = iris
    r = make_client().post("/train", json={"model_type": "lda", "X": X.tolist(), "y": y.tolist()})
    assert r.status_code == 201, r.text
    model = r.json()["model_id"]
    client = make_client(max_rows=3)
    body = {"inputs": [{"name": "x", "shape": [4, 4], "datatype": "FP64", "data": X[:4].tolist()}]}
    r = client.post(f"/v2/models/{model}/infer", json=body)
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "inputs[0].data"
    r = client.post(f"/predict?model={model}", json={"instances": X[:4].tolist()})
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "instances"


def test_unknown_model_is_404(client, models):
    assert client.post("/v2/models/nope/infer", json=KSERVE_V2).status_code == 404
    assert client.post("/v1/models/nope:predict", json=KSERVE_V1).status_code == 404
    assert client.post("/invocations?model=nope", json=MLFLOW_INPUTS).status_code == 404
