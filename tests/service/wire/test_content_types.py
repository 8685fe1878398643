"""Bodies are chosen by Content-Type: 415 for anything but JSON (and CSV where accepted)."""

from __future__ import annotations

import json

import pytest
from fastapi.routing import APIRoute
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api.app import create_app
from service.api.content_types import BodyRoute
from service.api.predict_route import PredictRoute
from service.settings import Settings

TRAIN_JSON = json.dumps(
    {"model_type": "lda", "X": [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]], "y": [0, 1, 0, 1]}
)
IRIS_CSV = "a,b,y\n0,1,x\n1,0,z\n2,2,x\n3,1,z\n"
BODY_ROUTES = [
    ("/train", TRAIN_JSON, True),
    ("/predict", json.dumps({"model": "m", "X": [[1.0, 2.0]]}), True),
    ("/models/by-name/m/aliases/stable", json.dumps({"version": 1}), False),
    ("/batch-predictions", json.dumps({"model": "m"}), False),
]


def api_routes(routes: list) -> list[APIRoute]:
    """Every ``APIRoute``, also inside included routers (FastAPI keeps those as one entry)."""
    out = []
    for route in routes:
        if isinstance(route, APIRoute):
            out.append(route)
        elif hasattr(route, "original_router"):
            out += api_routes(route.original_router.routes)
    return out


def test_every_route_with_a_body_checks_its_content_type(tmp_path):
    app = create_app(Settings(data_dir=tmp_path))
    with_body = [r for r in api_routes(app.routes) if r.body_field is not None]
    assert {r.path for r in with_body} >= {"/train", "/predict"}
    unchecked = [r.path for r in with_body if not isinstance(r, BodyRoute | PredictRoute)]
    assert unchecked == [], "give these routers route_class=BodyRoute (or CsvRoute, PredictRoute)"


@pytest.mark.parametrize(("path", "body", "takes_csv"), BODY_ROUTES)
@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data", None]
)
def test_other_content_types_are_415_naming_the_accepted_ones(
    client, path, body, takes_csv, content_type
):
    headers = {} if content_type is None else {"Content-Type": content_type}
    method = client.put if "aliases" in path else client.post
    r = method(path, content=body, headers=headers)
    assert r.status_code == 415, r.text
    envelope = r.json()
    assert envelope["code"] == "UNSUPPORTED_MEDIA_TYPE"
    assert set(envelope) == {"error", "code", "details", "request_id"}
    assert "application/json" in envelope["error"]
    assert ("text/csv" in envelope["error"]) is takes_csv
    (problem,) = envelope["details"]
    assert problem["field"] == "Content-Type"
    assert "-H 'Content-Type: application/json'" in problem["problem"]
    if content_type is None:
        assert "no Content-Type" in envelope["error"]
    else:
        assert content_type in envelope["error"]
    if content_type == "application/x-www-form-urlencoded":
        assert "curl -d" in problem["problem"]


def test_curl_d_without_a_content_type_is_415_with_the_fix(client):
    """What ``curl -d '{...}' URL`` sends: JSON text labelled as a form."""
    r = client.post(
        "/train",
        content=TRAIN_JSON,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 415
    assert "text/csv" in r.json()["details"][0]["problem"]
    assert "--data-binary" in r.json()["details"][0]["problem"]


def test_a_media_type_that_is_not_plain_is_not_echoed(client):
    r = client.post("/train", content=TRAIN_JSON, headers={"Content-Type": "x<script>/y; a=b"})
    assert r.status_code == 415 and "<script>" not in r.text


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "application/vnd+json"]
)
def test_json_media_types_are_accepted(client, content_type):
    r = client.post("/train", content=TRAIN_JSON, headers={"Content-Type": content_type})
    assert r.status_code == 201, r.text


def test_empty_body_without_content_type_is_a_missing_body_not_415(client):
    r = client.post("/train")
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "body"


@pytest.mark.parametrize("path", ["/train", "/predict"])
def test_csv_without_line_breaks_is_422_telling_to_use_data_binary(client, path):
    """``curl -d @file.csv`` strips the newlines: the body arrives as one line."""
    params = {"model_type": "lda", "target": "y"} if path == "/train" else {"model": "m"}
    one_line = IRIS_CSV.replace("\n", "")
    r = client.post(path, params=params, content=one_line, headers={"Content-Type": "text/csv"})
    assert r.status_code == 422, r.text
    assert r.json()["details"][0]["field"] == "body"
    assert "--data-binary @file.csv" in r.json()["details"][0]["problem"]
    good = client.post(path, params=params, content=IRIS_CSV, headers={"Content-Type": "text/csv"})
    assert good.status_code != 422 or good.json()["details"][0]["field"] != "body"


def test_openapi_declares_415_on_routes_with_a_body(client):
    doc = client.get("/openapi.json").json()
    for path, method in (("/train", "post"), ("/predict", "post")):
        assert "415" in doc["paths"][path][method]["responses"]
    assert "415" not in doc["paths"]["/models"]["get"]["responses"]


@pytest.mark.parametrize(
    "raw",
    [
        TRAIN_JSON.replace("[0.0, 1.0]", "[NaN, 1.0]"),  # orjson refuses: FastAPI's reader takes it
        TRAIN_JSON.replace('"lda"', '"lda\\ud800"'),  # a lone surrogate: the same
        TRAIN_JSON[:-1],  # malformed for both readers
        "[1, 2]",  # JSON, but no object
        "null",
    ],
)
def test_a_json_train_body_is_answered_as_the_standard_reader_would(client, raw):
    """orjson reads what it can, the standard library the rest: the answers are unchanged."""
    r = client.post("/train", content=raw, headers={"Content-Type": "application/json"})
    if raw == TRAIN_JSON[:-1]:
        assert r.status_code == 400, r.text
        assert r.json()["details"] == [{"field": "body", "problem": "the body is not valid JSON"}]
        return
    assert r.status_code == 422, r.text
    if "NaN" in raw:
        assert r.json()["details"][0]["field"] == "X[0][0]"  # the finite check, as before


def test_fast_json_reads_what_orjson_reads_and_leaves_the_rest():
    from service.api.csv_route import fast_json

    assert fast_json(TRAIN_JSON.encode()) == json.loads(TRAIN_JSON)
    assert fast_json(b"") is None
    assert fast_json(b'{"x": NaN}') is None
    assert fast_json(b'{"x": 1') is None


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 4, max_value=2**64 + 4)
    | st.integers(min_value=-(2**63) - 4, max_value=-(2**63) + 4)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_what_fast_json_reads_is_what_the_standard_library_reads(value):
    from service.api.csv_route import fast_json

    raw = json.dumps(value).encode()
    fast = fast_json(raw)
    if fast is not None:  # read as json.loads reads it, an int stays an int, exact
        assert json.dumps(fast) == json.dumps(json.loads(raw))


@pytest.mark.parametrize("number", ["-9223372036854775809", "18446744073709551616", "1" * 30])
def test_integers_past_64_bits_are_left_to_the_standard_library(number):
    from service.api.csv_route import fast_json

    assert fast_json(f'{{"y": [{number}, 1]}}'.encode()) is None
