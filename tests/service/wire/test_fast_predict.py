"""Our ``POST /predict`` JSON decoder: whatever its fast reader takes, it reads as ``PredictRequest``
would; whatever it is unsure of, ``wire.ours.validate`` answers exactly as FastAPI's own body
handling does (same status, same envelope), checked against a plain FastAPI route."""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np
import pytest
from fastapi import Body, Request
from fastapi.responses import Response
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api.deps import GateDep, SettingsDep, StoreDep
from service.inference import predict as prediction
from service.inference.query import PredictQuery
from service.schemas.predict import PredictRequest
from service.wire import ours
from service.wire import ours as fast_predict
from tests.service.conftest import train_body

ROW = [5.1, 3.5, 1.4, 0.2]
NAMES = ["sl", "sw", "pl", "pw"]


def raw(**fields) -> bytes:
    return json.dumps({"model": "iris", "X": [ROW], **fields}).encode()


def without(key: str) -> bytes:
    body = {"model": "iris", "X": [ROW]}
    del body[key]
    return json.dumps(body).encode()


#: Bodies the fast reader must take (a valid ``PredictRequest`` of plain numbers).
VALID = [
    raw(),
    raw(X=[ROW, ROW, [0, 0, 0, 0]]),
    raw(X=[[5, 3, 1, 0]]),  # integers
    raw(X=[[True, False, True, 1.5]]),  # booleans are numbers to list[float]
    raw(X=[[2**64, 1.5, -(2**63) - 1, 0.1]]),  # past int64: read as the nearest double
    raw(X=[[1e-400, 1e308, -0.0, 5e-324]]),
    raw(X=[[5.1, 3.5, 1.4, 2**70 + 1]]),  # past 64 bits: orjson reads the nearest double
    raw(X=[[5, 3, 1, 123456789012345678901234567891]]),
    raw(X=[[2**63, -1, 2**64 - 1, -(2**63)]]),  # uint64 and negative ints in one row
    raw(X=[[2**53 + 1, -(2**53) - 1, 2**63 - 1, 0]]),  # ints a double cannot hold exactly
    raw(X=[[True, True, False, True]]),  # booleans only
    raw(X=[[-0.0, 0, -0, 0.0]]),
    raw(outputs=["label", "decision", "probability"]),
    raw(outputs=["predictions", "predictions"]),
    raw(level=0.5, outputs=["decision_function"]),
    raw(feature_names=list(reversed(NAMES))),
    raw(feature_names=None),
    raw(X=[[1.0, 2.0, 3.0]]),  # the wrong width: a 422 from the service, on both paths
    raw(feature_names=["a", "b", "c", "d"]),  # unknown names: a 422 from the service
    raw(model="nope"),  # 404
    raw(model="m_" + "0" * 32),  # an id that does not exist: 404
    raw(outputs=["interval"]),  # a model without draws: 409
    b'{"model": "nope", "model": "iris", "X": [[5.1, 3.5, 1.4, 0.2]]}',  # the last key wins
    b' \n{"X": [[5.1,3.5,1.4,0.2]], "model": "iris"}\n ',
]

#: Bodies the fast reader must leave to the pydantic path (and the status that path gives).
UNSURE = [
    b"",
    b"not json",
    b'{"model": "iris", "X": [[5.1, 3.5, 1.4, 0.2]]',
    b"[]",
    b"null",
    b'"iris"',
    b"\xef\xbb\xbf" + raw(),  # a UTF-8 BOM
    raw().decode().encode("utf-16"),  # json.loads reads UTF-16; orjson does not
    raw(unknown=1),
    raw(model=1),
    raw(model=None),
    raw(model=""),
    raw(model="a" * 141),
    without("model"),
    without("X"),
    raw(X=[]),
    raw(X=[[]]),
    raw(X=[ROW, [1.0, 2.0]]),  # ragged
    raw(X=[ROW, []]),
    raw(X=[["5.1", "3.5", "1.4", "0.2"]]),  # numeric strings: pydantic's lax float takes them
    raw(X=[[5.1, "x", 1.4, 0.2]]),
    raw(X=[[5.1, None, 1.4, 0.2]]),
    raw(X=[[5.1, [3.5], 1.4, 0.2]]),
    raw(X=[[ROW]]),  # 3-D
    raw(X=[ROW, [*ROW[:3], [1.0]]]),  # a list as the last value of a later row
    raw(X=[[[1.0], [2.0], [3.0], [4.0]]]),  # lists of one number as values
    raw(X=[ROW, [*ROW, 1.0]]),  # a later row longer
    raw(X=[ROW, "5.1,3.5,1.4,0.2"]),  # a row that is a string
    raw(X=[ROW, {"a": 1, "b": 2, "c": 3, "d": 4}]),  # a row that is an object of four keys
    raw(X=ROW),  # 1-D
    raw(X="5.1,3.5,1.4,0.2"),
    raw(X={"a": ROW}),
    raw(X=[[5.1, 3.5, 1.4, 10**400]]),  # an integer past any double
    b'{"model": "iris", "X": [[5.1, 3.5, 1.4, 1e400]]}',  # json.loads: inf, then a 422
    b'{"model": "iris", "X": [[5.1, 3.5, 1.4, NaN]]}',
    b'{"model": "iris", "X": [[5.1, 3.5, 1.4, Infinity]]}',
    b'{"model": "iris", "X": [[5.1, 3.5, 1.4, -Infinity]]}',
    raw(X=[[5.1, 3.5, 1.4, "NaN"]]),
    raw(X=[[5.1, 3.5, 1.4, "inf"]]),
    raw(outputs=[]),
    raw(outputs="label"),
    raw(outputs=["bogus"]),
    raw(outputs=[1]),
    raw(outputs=None),
    raw(outputs=["label"] * 9),
    raw(level=0),
    raw(level=1),
    raw(level=1.5),
    raw(level="0.9"),
    raw(level=True),
    raw(level=None),
    raw(feature_names="sl"),
    raw(feature_names=[1, 2, 3, 4]),
    raw(model="iris\ud800"),  # a lone surrogate: json.loads takes it, orjson does not
]


@pytest.fixture(scope="module")
def client(module_client):
    """One app for the module: its tests only predict, or train under a name of their own."""
    return module_client


@pytest.fixture(scope="module")
def iris_model(client, iris) -> dict:
    """LDA on iris named ``iris``, trained once for the module (no test changes it)."""
    X, y = iris
    r = client.post("/train", json=train_body(X, y, name="iris", feature_names=NAMES))
    assert r.status_code == 201
    return r.json()


def answer(client, body: bytes, **headers: str) -> tuple[int, dict]:
    """Status and JSON body of ``POST /predict`` with ``body``, the request id left out."""
    r = client.post(
        "/predict", content=body, headers={"content-type": "application/json", **headers}
    )
    out = r.json()
    if isinstance(out, dict):
        out.pop("request_id", None)
    return r.status_code, out


def slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_predict, "fast_body", lambda raw: None)


@pytest.mark.parametrize("body", VALID, ids=range(len(VALID)))
def test_a_plain_body_is_read_exactly_as_pydantic_reads_it(body):
    fast = fast_predict.fast_body(body)
    assert fast is not None
    model = PredictRequest.model_validate(json.loads(body))
    assert fast.model == model.model and fast.outputs == model.outputs
    assert fast.level == model.level and fast.feature_names == model.feature_names
    expected = np.asarray(model.X, dtype=np.float64)
    assert fast.X.dtype == np.float64
    np.testing.assert_array_equal(fast.X, expected, strict=True)
    assert np.array_equal(np.signbit(fast.X), np.signbit(expected))


@pytest.mark.parametrize("body", UNSURE, ids=range(len(UNSURE)))
def test_an_unusual_body_is_left_to_pydantic(body):
    assert fast_predict.fast_body(body) is None


@pytest.mark.parametrize("body", VALID, ids=range(len(VALID)))
def test_both_paths_answer_alike(client, iris_model, monkeypatch, body):
    fast = answer(client, body)
    slow_path(monkeypatch)
    assert answer(client, body) == fast


REFERENCE = "/reference/predict"


def with_reference_route(client) -> None:
    """Add FastAPI's own handling of a ``PredictRequest`` body at ``REFERENCE``: its JSON read
    and its validation, then the one scoring function and our JSON encoder."""

    @client.app.post(REFERENCE)
    def reference(
        body: Annotated[PredictRequest, Body()],
        request: Request,
        store: StoreDep,
        settings: SettingsDep,
        gate: GateDep,
    ) -> Response:
        query = PredictQuery(body.model, body.X, body.feature_names, list(body.outputs), body.level)
        out = prediction.score(store, settings, gate, query)
        return Response(ours.encode(out), media_type="application/json")


def test_unusual_bodies_answer_as_fastapi_reads_them(client, iris_model):
    """The bodies the fast reader declines take ``ours.validate``: the same status and envelope as
    FastAPI's own body reading and validation of ``PredictRequest`` give."""
    with_reference_route(client)
    for body in UNSURE:
        ours_ = answer(client, body)
        reference = client.post(
            REFERENCE, content=body, headers={"content-type": "application/json"}
        )
        expected = reference.json()
        if isinstance(expected, dict):
            expected.pop("request_id", None)
        assert ours_ == (reference.status_code, expected), body


def test_a_valid_body_is_answered_by_the_fast_path(client, iris_model, monkeypatch):
    body = raw(outputs=["label", "decision", "probability"])
    fast = answer(client, body)
    assert fast[0] == 200 and len(fast[1]["probabilities"]) == 1
    read, validated = [], []
    real_read, real_validate = ours.fast_body, ours.validate
    monkeypatch.setattr(ours, "fast_body", lambda raw: read.append(real_read(raw)) or read[-1])
    monkeypatch.setattr(ours, "validate", lambda v: validated.append(v) or real_validate(v))
    assert answer(client, body) == fast
    assert len(read) == 1 and read[0] is not None and validated == []


@pytest.mark.parametrize("body", [raw(X=[ROW[:3]] * 3), raw(X=[ROW])], ids=["rows", "features"])
def test_row_and_feature_caps_answer_alike(make_client, iris, monkeypatch, body):
    X, y = iris
    r = make_client().post("/train", json=train_body(X[:, :3], y, name="iris3"))
    assert r.status_code == 201
    client = make_client(max_rows=2, max_features=3)  # a replica with lower caps
    body = body.replace(b'"iris"', b'"iris3"')
    fast = answer(client, body)
    assert fast[0] == 422 and "too many" in fast[1]["error"]
    slow_path(monkeypatch)
    assert answer(client, body) == fast


def test_the_csv_answer_is_the_same_on_both_paths(client, iris_model, monkeypatch):
    body = raw(X=[ROW, ROW], outputs=["label", "probability"])
    headers = {"content-type": "application/json", "accept": "text/csv"}
    fast = client.post("/predict", content=body, headers=headers)
    slow_path(monkeypatch)
    slow = client.post("/predict", content=body, headers=headers)
    assert fast.status_code == slow.status_code == 200
    assert fast.headers["content-type"] == slow.headers["content-type"]
    assert fast.text == slow.text


def test_a_preprocessed_kernel_model_answers_alike(client, iris, monkeypatch):
    X, y = iris
    params = {"probability": True, "random_state": 0}
    body = train_body(X, y, "kernel_svm", name="rbf", preprocess="standard", params=params)
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    predict = json.dumps(
        {"model": "rbf", "X": X[::7].tolist(), "outputs": ["label", "decision", "probability"]}
    ).encode()
    fast = answer(client, predict)
    assert fast[0] == 200
    slow_path(monkeypatch)
    assert answer(client, predict) == fast


EDGE_INTS = [2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64, 2**64 + 1]
NUMBER = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from(EDGE_INTS + [-v for v in EDGE_INTS]),
    st.booleans(),
)
CELL = st.one_of(NUMBER, st.text(max_size=3), st.none(), st.lists(NUMBER, max_size=2))


@settings(max_examples=300, deadline=None)
@given(
    X=st.one_of(
        st.lists(st.lists(NUMBER, min_size=1, max_size=4), min_size=1, max_size=4),
        st.lists(st.lists(CELL, max_size=4), max_size=4),
        CELL,
    ),
    extra=st.dictionaries(
        st.sampled_from(["outputs", "level", "feature_names", "model", "other"]),
        st.one_of(
            NUMBER, st.text(max_size=4), st.lists(st.sampled_from(["label", "decision", "x"]))
        ),
        max_size=2,
    ),
)
def test_anything_the_fast_reader_takes_pydantic_takes_the_same(X, extra):
    body = json.dumps({"model": "iris", "X": X, **extra}).encode()
    fast = fast_predict.fast_body(body)
    if fast is None:
        return
    model = PredictRequest.model_validate(json.loads(body))
    expected = np.asarray(model.X, dtype=np.float64)
    np.testing.assert_array_equal(fast.X, expected, strict=True)
    assert np.array_equal(np.signbit(fast.X), np.signbit(expected)) and fast.X.flags.writeable
    assert (fast.model, fast.outputs, fast.level, fast.feature_names) == (
        model.model,
        model.outputs,
        model.level,
        model.feature_names,
    )


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 20).flatmap(
        lambda width: st.lists(st.lists(NUMBER, min_size=width, max_size=width), min_size=1)
    )
)
def test_every_matrix_of_numbers_is_read_by_the_fast_reader_as_pydantic_reads_it(rows):
    body = json.dumps({"model": "iris", "X": rows}).encode()
    fast = fast_predict.fast_body(body)
    assert fast is not None
    expected = np.asarray(PredictRequest.model_validate(json.loads(body)).X, dtype=np.float64)
    np.testing.assert_array_equal(fast.X, expected, strict=True)
    assert np.array_equal(np.signbit(fast.X), np.signbit(expected))


@pytest.mark.parametrize("body", VALID + UNSURE, ids=range(len(VALID + UNSURE)))
def test_rows_packed_a_few_at_a_time_read_alike(monkeypatch, body):
    whole = fast_predict.fast_body(body)
    monkeypatch.setattr(fast_predict, "PACK_ROWS", 2)
    parts = fast_predict.fast_body(body)
    assert (parts is None) == (whole is None)
    if whole is not None:
        np.testing.assert_array_equal(parts.X, whole.X, strict=True)
        assert parts.X.flags.writeable


def test_a_bad_row_past_the_first_pack_is_refused(monkeypatch):
    monkeypatch.setattr(fast_predict, "PACK_ROWS", 2)
    for bad in ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0, "4"], "row", [1.0, 2.0, 3.0, None]):
        assert fast_predict.fast_body(raw(X=[ROW] * 5 + [bad])) is None
    assert fast_predict.fast_body(raw(X=[ROW] * 5)).X.shape == (5, 4)
