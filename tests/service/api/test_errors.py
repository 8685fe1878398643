"""The one error envelope: ApiError, validation, unknown routes, bad JSON, body cap, crashes."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
from fastapi import APIRouter, Query
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from service.api.app import create_app
from service.errors import ApiError, Busy, Conflict, NotFound, Unavailable, detail
from service.settings import Settings
from service.wire.validation import field_path, validation_details

SECRET = "s3cr3t-value-never-echoed"


class Params(BaseModel):
    C: float = Field(1.0, gt=0, le=1e6)
    kernel: str = "rbf"


class Body(BaseModel):
    params: Params = Params()
    X: list[list[float]] = Field(max_length=5)


probe = APIRouter()


@probe.post("/_probe/echo")
def echo(body: Body) -> dict[str, int]:
    return {"rows": len(body.X)}


@probe.get("/_probe/raise/{status}")
def raise_status(status: int) -> None:
    errors: dict[int, ApiError] = {
        404: NotFound("no model 'abc'", [detail("model", "unknown")]),
        409: Conflict("model has no probabilities"),
        429: Busy("too many trainings", headers={"Retry-After": "3"}),
        503: Unavailable("not ready", headers={"Retry-After": "5"}),
    }
    raise errors[status]


@probe.get("/_probe/crash")
def crash() -> None:
    raise RuntimeError(f"internal detail {SECRET}")


@probe.get("/_probe/query")
def query(level: Annotated[float, Query(gt=0, lt=1)] = 0.95) -> dict[str, float]:
    return {"level": level}


def envelope(response) -> dict:
    """The body, checked to be exactly the envelope with the header's request id."""
    body = response.json()
    assert set(body) == {"error", "code", "details", "request_id"}
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert isinstance(body["error"], str) and body["error"]
    return body


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    """One app for the module (its tests change nothing): a small body cap and the probe routes."""
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("app"), max_body_mb=0.01))
    app.include_router(probe)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_unknown_route_is_404_envelope(client):
    response = client.get("/no/such/route")
    assert response.status_code == 404
    assert envelope(response)["code"] == "NOT_FOUND"


def test_wrong_method_is_405_envelope_with_allow(client):
    response = client.delete("/health/live")
    assert response.status_code == 405
    assert envelope(response)["code"] == "METHOD_NOT_ALLOWED"
    assert "GET" in response.headers["allow"]


def test_unparseable_json_is_400(client):
    response = client.post(
        "/_probe/echo", content=b'{"X": [[1, 2', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    body = envelope(response)
    assert body["code"] == "BAD_REQUEST"
    assert body["details"] == [{"field": "body", "problem": "the body is not valid JSON"}]


def test_validation_error_is_422_with_field_paths(client):
    payload = {"params": {"C": -1.0, "kernel": "rbf"}, "X": [[1.0], [2.0], ["oops"]]}
    response = client.post("/_probe/echo", json=payload)
    assert response.status_code == 422
    body = envelope(response)
    assert body["code"] == "INVALID_INPUT"
    fields = {d["field"] for d in body["details"]}
    assert fields == {"params.C", "X[2][0]"}


def test_validation_error_never_echoes_input(client):
    payload = {"params": {"C": SECRET}, "X": [[SECRET]], SECRET: 1}
    response = client.post("/_probe/echo", json=payload)
    assert response.status_code == 422
    assert SECRET not in response.text


def test_query_bounds_are_422(client):
    response = client.get("/_probe/query", params={"level": 1.5})
    assert response.status_code == 422
    assert envelope(response)["details"][0]["field"] == "level"


def test_row_cap_from_schema_is_422(client):
    response = client.post("/_probe/echo", json={"X": [[1.0]] * 6})
    assert response.status_code == 422
    assert envelope(response)["details"][0]["field"] == "X"


@pytest.mark.parametrize(
    ("status", "code"), [(404, "NOT_FOUND"), (409, "CONFLICT"), (429, "BUSY"), (503, "UNAVAILABLE")]
)
def test_api_errors_keep_status_code_and_headers(client, status, code):
    response = client.get(f"/_probe/raise/{status}")
    assert response.status_code == status
    assert envelope(response)["code"] == code
    if status in (429, 503):
        assert int(response.headers["Retry-After"]) > 0


def test_api_error_details_are_rendered(client):
    body = envelope(client.get("/_probe/raise/404"))
    assert body["details"] == [{"field": "model", "problem": "unknown"}]


def test_unexpected_exception_is_500_without_trace(client):
    response = client.get("/_probe/crash")
    assert response.status_code == 500
    body = envelope(response)
    assert body["code"] == "INTERNAL"
    assert SECRET not in response.text
    assert "Traceback" not in response.text


def test_body_over_cap_by_content_length_is_413(client):
    response = client.post("/_probe/echo", content=b"x" * 20_000)
    assert response.status_code == 413
    assert envelope(response)["code"] == "PAYLOAD_TOO_LARGE"


def test_body_over_cap_counted_on_the_stream_is_413(client):
    def chunks():
        for _ in range(40):
            yield b"[" * 512

    response = client.post(
        "/_probe/echo", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert response.status_code == 413
    assert envelope(response)["code"] == "PAYLOAD_TOO_LARGE"


def test_body_under_cap_streamed_is_accepted(client):
    data = json.dumps({"X": [[1.0, 2.0]]}).encode()

    def chunks():
        yield data[:5]
        yield data[5:]

    response = client.post(
        "/_probe/echo", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json() == {"rows": 1}


def test_request_id_is_echoed_when_plain_and_replaced_otherwise(client):
    kept = client.get("/health/live", headers={"X-Request-ID": "trace-123.a_b"})
    assert kept.headers["X-Request-ID"] == "trace-123.a_b"
    replaced = client.get("/health/live", headers={"X-Request-ID": "bad id\twith spaces"})
    assert replaced.headers["X-Request-ID"] != "bad id\twith spaces"
    assert len(replaced.headers["X-Request-ID"]) == 32


def test_every_response_has_a_distinct_request_id(client):
    ids = {client.get("/health/live").headers["X-Request-ID"] for _ in range(5)}
    assert len(ids) == 5


def test_field_path_formats():
    assert field_path(("body", "params", "C")) == "params.C"
    assert field_path(("body", "X", 2)) == "X[2]"
    assert field_path(("body", "kernel_svm", "params", "gamma", "float")) == "params.gamma"
    assert field_path(("body",)) == "body"
    assert field_path(("query", "level")) == "level"


def test_union_tag_error_does_not_echo_the_tag():
    errors = [
        {
            "type": "union_tag_invalid",
            "loc": ("body",),
            "msg": f"Input tag '{SECRET}' found using 'model_type' does not match",
            "input": {"model_type": SECRET},
            "ctx": {"discriminator": "'model_type'", "expected_tags": "'lda', 'qda'"},
        }
    ]
    (only,) = validation_details(errors)
    assert SECRET not in only.problem
    assert "lda" in only.problem
