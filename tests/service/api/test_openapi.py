"""The OpenAPI document: committed file current, valid 3.1, every error status declared; /docs."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from openapi_spec_validator import validate

from service.api.app import create_app
from service.api.document import DOC_PATH, current_document
from service.api.openapi import error_responses
from service.settings import Settings

ENVELOPE = {"$ref": "#/components/schemas/ErrorBody"}


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(current_document())


def operations(doc: dict):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def test_committed_document_is_current():
    committed = DOC_PATH.read_text()
    assert committed == current_document(), (
        "openapi/openapi.json drifted from the app: run .venv/bin/python scripts/gen_openapi.py"
    )


def test_document_is_valid_openapi_3_1(doc):
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_every_operation_declares_the_app_wide_errors(doc):
    for path, method, operation in operations(doc):
        responses = operation["responses"]
        for status in ("413", "500"):
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == ENVELOPE, (path, method, status)
        if "security" in operation:
            assert responses["401"]["content"]["application/json"]["schema"] == ENVELOPE


def test_validation_errors_use_the_envelope(doc):
    text = json.dumps(doc)
    assert "HTTPValidationError" not in text
    for path, method, operation in operations(doc):
        if "422" in operation["responses"]:
            schema = operation["responses"]["422"]["content"]["application/json"]["schema"]
            assert schema == ENVELOPE, (path, method)


def test_error_body_schema_is_the_envelope(doc):
    schema = doc["components"]["schemas"]["ErrorBody"]
    assert set(schema["required"]) == {"error", "code", "request_id"}
    assert set(schema["properties"]) == {"error", "code", "details", "request_id"}


def test_error_responses_helper():
    responses = error_responses(404, 429)
    assert set(responses) == {404, 429}
    assert responses[404]["model"].__name__ == "ErrorBody"
    assert "Retry-After" in responses[429]["headers"]


def test_served_document_equals_generated(tmp_path, doc):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        served = client.get("/openapi.json").json()
    assert served == doc


def test_swagger_ui_is_served_from_local_assets(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert not re.search(r"(src|href)=\"https?://", page.text), "docs must not load a CDN"
        assets = re.findall(r"(?:src|href)=\"(/docs/static/[^\"]+)\"", page.text)
        assert len(assets) >= 2
        for asset in assets:
            response = client.get(asset)
            assert response.status_code == 200, asset
            assert len(response.content) > 1000
        bundle = client.get("/docs/static/swagger-ui-bundle.js").text
        # Swagger UI 5 is the first major version that renders OpenAPI 3.1 documents.
        assert re.search(r"\"5\.\d+\.\d+\"", bundle)
