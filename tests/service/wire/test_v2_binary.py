"""The Open Inference Protocol's binary tensor data extension on the V2 infer routes.

Layout from KServe's and Triton's "Binary Tensor Data Extension" documents: the request is its
JSON object, then each binary input's bytes (little-endian, row-major) in the order of
``inputs``, ``Inference-Header-Content-Length`` giving the JSON's length; outputs asked for as
binary come back the same way. Every answer is checked against the JSON route's on the same
values, which is itself checked against ``/predict`` in ``test_protocols``.
"""

from __future__ import annotations

import struct

import httpx
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from service.api.app import create_app
from service.settings import Settings
from service.wire import v2_binary as binary_tensors
from tests.service.live_server import live_server
from tests.service.wire.test_protocols import IRIS_NAMES

HEADER = "Inference-Header-Content-Length"
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def client(module_client):
    """One app for the module: its tests only predict on the two models of ``models``."""
    return module_client


@pytest.fixture(scope="module")
def models(client, iris) -> dict:
    """``iris``: LDA with string labels and feature names; ``ints``: kernel SVM, labels 0/1/2."""
    X, y = iris
    named = {"model_type": "lda", "name": "iris", "X": X.tolist(), "y": y.tolist()}
    ints = {
        "model_type": "kernel_svm",
        "name": "ints",
        "X": X.tolist(),
        "y": [int(v) for v in np.unique(y, return_inverse=True)[1]],
        "params": {"probability": True, "random_state": 0},
    }
    out = {}
    for body in ({**named, "feature_names": IRIS_NAMES}, ints):
        r = client.post("/train", json=body)
        assert r.status_code == 201, r.text
        out[body["name"]] = r.json()
    return out


def binary_request(
    inputs: list[tuple[str, np.ndarray, str]], **extra
) -> tuple[bytes, dict[str, str]]:
    """Body and headers of a request whose inputs are all binary: (name, array, datatype)."""
    tensors, data = [], []
    for name, array, datatype in inputs:
        raw = np.ascontiguousarray(array, dtype=binary_tensors.DTYPES[datatype]).tobytes()
        tensors.append(
            {"name": name, "shape": list(array.shape), "datatype": datatype}
            | {"parameters": {"binary_data_size": len(raw)}}
        )
        data.append(raw)
    head = orjson.dumps({"inputs": tensors, **extra})
    return head + b"".join(data), {**OCTETS, HEADER: str(len(head))}


def decoded(response: httpx.Response) -> dict[str, np.ndarray | list]:
    """Each output tensor's values, from its JSON ``data`` or its binary data."""
    if HEADER.lower() in response.headers:
        length = int(response.headers[HEADER])
        head, data = orjson.loads(response.content[:length]), response.content[length:]
    else:
        head, data = response.json(), b""
    out, at = {}, 0
    for tensor in head["outputs"]:
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            out[tensor["name"]] = tensor["data"]
            continue
        raw, at = data[at : at + size], at + size
        if tensor["datatype"] == "BYTES":
            values, k = [], 0
            while k < len(raw):
                (n,) = struct.unpack_from("<I", raw, k)
                values.append(raw[k + 4 : k + 4 + n].decode())
                k += 4 + n
            out[tensor["name"]] = values
        else:
            dtype = binary_tensors.DTYPES[tensor["datatype"]]
            out[tensor["name"]] = np.frombuffer(raw, dtype=dtype).reshape(tensor["shape"])
    assert at == len(data), "bytes after the last binary output"
    return out


def json_outputs(client, path: str, X: np.ndarray) -> dict:
    body = {"inputs": [{"name": "x", "shape": list(X.shape), "datatype": "FP64"}]}
    body["inputs"][0]["data"] = X.tolist()
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    return {t["name"]: t["data"] for t in r.json()["outputs"]}


def assert_same(binary: dict, want: dict) -> None:
    assert binary.keys() == want.keys()
    for name, values in want.items():
        got = binary[name]
        got = got.ravel().tolist() if isinstance(got, np.ndarray) else got
        assert got == values, name  # the same float64 rows: the same bits


@pytest.mark.parametrize("datatype", ["FP64", "FP32", "FP16", "INT32", "UINT8", "INT64"])
@pytest.mark.parametrize(
    "path", ["/v2/models/ints/infer", "/v2/models/ints/versions/1/infer", "/predict?model=ints"]
)
def test_binary_inputs_answer_what_the_json_route_answers(client, models, iris, datatype, path):
    X = iris[0][::7] * (10 if datatype.startswith(("INT", "UINT")) else 1)
    sent = X.astype(binary_tensors.DTYPES[datatype])
    body, headers = binary_request([("x", sent, datatype)])
    r = client.post(path, content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"  # no output asked for as binary
    assert r.json()["model_name"] == "ints" and r.json()["parameters"] == {
        "model_id": models["ints"]["model_id"]
    }
    assert_same(decoded(r), json_outputs(client, path, sent.astype(np.float64)))


@pytest.mark.parametrize("model", ["iris", "ints"])
def test_binary_outputs_decode_to_the_json_outputs(client, models, iris, model):
    X = iris[0][::5]
    path = f"/v2/models/{model}/infer"
    body, headers = binary_request([("x", X, "FP64")], parameters={"binary_data_output": True})
    r = client.post(path, content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    head = orjson.loads(r.content[: int(r.headers[HEADER])])
    label = next(t for t in head["outputs"] if t["name"] == "label")
    assert label["datatype"] == ("BYTES" if model == "iris" else "INT64") and "data" not in label
    assert_same(decoded(r), json_outputs(client, path, X))


def test_an_outputs_own_setting_overrides_the_requests(client, models, iris):
    X = iris[0][:3]
    outputs = [
        {"name": "label", "parameters": {"binary_data": False}},
        {"name": "probability"},
        {"name": "decision", "parameters": {"binary_data": True}},
    ]
    body, headers = binary_request(
        [("x", X, "FP64")], outputs=outputs, parameters={"binary_data_output": True}, id="7"
    )
    r = client.post("/v2/models/iris/infer", content=body, headers=headers)
    assert r.status_code == 200, r.text
    head = orjson.loads(r.content[: int(r.headers[HEADER])])
    assert head["id"] == "7"
    kinds = {t["name"]: "data" in t for t in head["outputs"]}
    assert kinds == {"label": True, "decision": False, "probability": False}
    want = json_outputs(client, "/v2/models/iris/infer", X)
    assert_same(decoded(r), want)


@pytest.mark.parametrize("path", ["/v2/models/iris/infer", "/predict?model=iris"])
def test_a_json_request_may_ask_for_binary_outputs(client, models, iris, path):
    X = iris[0][:4]
    body = {
        "inputs": [{"name": "x", "shape": [4, 4], "datatype": "FP64", "data": X.tolist()}],
        "outputs": [{"name": "label"}, {"name": "decision", "parameters": {"binary_data": True}}],
    }
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    got = decoded(r)
    assert got["decision"].shape == (4, 3)
    want = json_outputs(client, "/v2/models/iris/infer", X)
    assert got["label"] == want["label"] and got["decision"].ravel().tolist() == want["decision"]


def test_feature_columns_mixing_binary_and_json_are_put_in_model_order(client, models, iris):
    X = iris[0][10:16]
    order = [2, 0, 3, 1]  # sent out of the model's order, one tensor per feature
    tensors, data = [], []
    for j in order:
        name = IRIS_NAMES[j]
        if j % 2:  # JSON data
            tensors.append(
                {"name": name, "shape": [6], "datatype": "FP64", "data": X[:, j].tolist()}
            )
        else:
            raw = X[:, j : j + 1].astype("<f8").tobytes()  # shape [6, 1]
            tensors.append(
                {"name": name, "shape": [6, 1], "datatype": "FP64"}
                | {"parameters": {"binary_data_size": len(raw)}}
            )
            data.append(raw)
    head = orjson.dumps({"inputs": tensors, "outputs": [{"name": "label"}]})
    headers = {**OCTETS, HEADER: str(len(head))}
    r = client.post("/v2/models/iris/infer", content=head + b"".join(data), headers=headers)
    assert r.status_code == 200, r.text
    ours = client.post("/predict", json={"model": "iris", "X": X.tolist()}).json()
    assert decoded(r)["label"] == ours["predictions"]


def _one(X: np.ndarray, size: int | None = None, **tensor) -> tuple[bytes, dict[str, str]]:
    raw = np.ascontiguousarray(X, dtype="<f8").tobytes()
    spec = {"name": "x", "shape": list(X.shape), "datatype": "FP64"}
    spec |= {"parameters": {"binary_data_size": len(raw) if size is None else size}} | tensor
    head = orjson.dumps({"inputs": [spec]})
    return head + raw, {**OCTETS, HEADER: str(len(head))}


def _bad_cases(X: np.ndarray) -> list[tuple[str, bytes, dict[str, str], str]]:
    body, headers = _one(X)
    nan = X.copy()
    nan[2, 1] = np.nan
    cases = [
        ("not digits", body, {**headers, HEADER: "12a"}, HEADER),
        ("zero", body, {**headers, HEADER: "0"}, HEADER),
        ("5,000 digits", body, {**headers, HEADER: "9" * 5000}, HEADER),
        ("leading zeros", body, {**headers, HEADER: "0" * 30 + "12"}, HEADER),
        ("past the body", body, {**headers, HEADER: str(len(body) + 1)}, HEADER),
        ("not json", b"{nope" + body, {**headers, HEADER: "5"}, "body"),
        ("a list", b"[1,2]" + body, {**headers, HEADER: "5"}, "body"),
        ("no header", body, OCTETS, HEADER),
        ("size off the shape", *_one(X, size=8), "inputs[0].parameters.binary_data_size"),
        ("size not a number", *_one(X, size="96"), "inputs[0].parameters.binary_data_size"),
        ("bytes", *_one(X, datatype="BYTES"), "inputs[0].datatype"),
        ("data too", *_one(X, data=X.tolist()), "inputs[0].data"),
        ("huge shape", *_one(X, shape=[10**12, 10**12]), "inputs[0].parameters.binary_data_size"),
        ("nan", *_one(nan), "inputs[0][2][1]"),
        ("1-D", *_one(X.ravel()), "inputs[0].shape"),
    ]
    short = _one(X)
    cases.append(
        ("bytes missing", short[0][:-8], short[1], "inputs[0].parameters.binary_data_size")
    )
    cases.append(("bytes left over", short[0] + b"\0" * 8, short[1], "body"))
    head = orjson.dumps(
        {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [[1, 2, 3, 4]]}]}
        | {"parameters": {"binary_data_output": "yes"}}
    )
    cases.append(
        (
            "binary_data_output",
            head,
            {**OCTETS, HEADER: str(len(head))},
            "parameters.binary_data_output",
        )
    )
    return cases


def test_bad_binary_requests_are_422_naming_the_field(client, models, iris):
    X = iris[0][:5]
    for case, body, headers, field in _bad_cases(X):
        r = client.post("/v2/models/iris/infer", content=body, headers=headers)
        assert r.status_code == 422, (case, r.status_code, r.text)
        assert field in [d["field"] for d in r.json()["details"]], (case, r.json())
    wrong_width, headers = _one(X[:, :3])
    assert (
        client.post("/v2/models/iris/infer", content=wrong_width, headers=headers).status_code
        == 422
    )
    body, headers = _one(X)
    missing = client.post("/v2/models/nope/infer", content=body, headers=headers)
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    for path in ("/predict", "/predict?model="):  # /predict takes the model from the query
        r = client.post(path, content=body, headers=headers)
        assert r.status_code == 422 and r.json()["details"][0]["field"] == "model", r.text
    r = client.post("/predict?model=iris", content=body, headers=OCTETS)
    assert r.status_code == 422 and r.json()["details"][0]["field"] == HEADER, r.text
    version = client.post("/v2/models/iris/versions/9/infer", content=body, headers=headers)
    assert version.status_code == 404 and "version 9" in version.json()["error"]


@given(
    arrays=st.lists(
        st.tuples(
            st.sampled_from(sorted(binary_tensors.DTYPES)),
            hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
        ),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=200, deadline=None)
def test_tensors_read_every_datatype_and_shape_as_written(arrays, seed):
    rng = np.random.default_rng(seed)
    inputs, data, want = [], [], []
    for i, (datatype, shape) in enumerate(arrays):
        dtype = binary_tensors.DTYPES[datatype]
        raw_bits = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
        raw = raw_bits.tobytes()
        inputs.append(
            {"name": f"t{i}", "shape": list(shape), "datatype": datatype}
            | {"parameters": {"binary_data_size": len(raw)}}
        )
        data.append(raw)
        want.append(np.frombuffer(raw, dtype=dtype).astype(np.float64))
    found = binary_tensors.tensors({"inputs": inputs}, memoryview(b"".join(data)))
    for (name, shape, values), i, expected in zip(found, range(len(want)), want, strict=True):
        assert name == f"t{i}" and shape == list(arrays[i][1])
        np.testing.assert_array_equal(values, expected)  # NaN where the bits are a NaN


def test_binary_infer_over_a_real_socket(tmp_path, iris):
    """uvicorn's HTTP parser hands the header and the raw bytes over as the TestClient does."""
    X, y = iris
    with live_server(tmp_path / "models", tmp_path, log_level="warning") as url:
        body = {"model_type": "lda", "name": "iris", "X": X.tolist(), "y": y.tolist()}
        assert httpx.post(f"{url}/train", json=body, timeout=120).status_code == 201
        content, headers = binary_request(
            [("x", X, "FP64")], parameters={"binary_data_output": True}
        )
        r = httpx.post(f"{url}/v2/models/iris/infer", content=content, headers=headers)
        assert r.status_code == 200, r.text
        labels = decoded(r)["label"]
        ours = httpx.post(f"{url}/predict", json={"model": "iris", "X": X.tolist()}).json()
        assert labels == ours["predictions"]
        assert httpx.get(f"{url}/v2").json()["extensions"] == ["binary_tensor_data"]


def test_the_documented_binary_example_answers_binary_outputs(client, models):
    doc = client.get("/openapi.json").json()
    media = doc["paths"]["/v2/models/{name}/infer"]["post"]["requestBody"]["content"]
    example = media["application/octet-stream"]["examples"]["binary_outputs"]
    body = example["value"].encode()
    assert f"{HEADER}: {len(body)}" in example["description"]
    headers = {**OCTETS, HEADER: str(len(body))}
    r = client.post("/v2/models/ints/infer", content=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    assert decoded(r)["label"].shape == (2,)


def test_a_binary_request_before_the_store_opens_is_503(tmp_path, iris):
    client = TestClient(create_app(Settings(data_dir=tmp_path)))  # lifespan not run: no store
    body, headers = _one(iris[0][:2])
    for path in ("/v2/models/iris/infer", "/predict?model=iris"):
        r = client.post(path, content=body, headers=headers)
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, r.text


def test_a_shape_of_many_dimensions_is_refused_before_it_is_multiplied(client, models, iris):
    """The product of 50,000 dimensions of 10^18 takes seconds (a million, hours): the count of
    dimensions is checked first, on the JSON route and the binary one."""
    shape = [10**18] * 50_000
    json_body = {"inputs": [{"name": "x", "shape": shape, "datatype": "FP64", "data": [1.0]}]}
    binary = _one(iris[0][:2], shape=shape)
    for r in (
        client.post("/v2/models/iris/infer", json=json_body),
        client.post("/predict?model=iris", json=json_body),
        client.post("/v2/models/iris/infer", content=binary[0], headers=binary[1]),
    ):
        assert r.status_code == 422, r.text
        assert r.json()["details"] == [
            {"field": "inputs[0].shape", "problem": "has 50000 dimensions; at most 4"}
        ]


def test_a_dimension_past_int64_is_refused_before_it_is_printed(client, models):
    """Two 4,000-digit dimensions multiply to more digits than ``str(int)`` prints: was a 500."""
    big = 10**4000
    text = '{"inputs": [{"name": "x", "shape": [%d, %d], "datatype": "FP64", "data": [1.0]}]}'
    for path in ("/v2/models/iris/infer", "/predict?model=iris"):
        r = client.post(
            path, content=text % (big, big), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 422, r.text
        assert r.json()["details"][0]["field"] == "inputs[0].shape"
