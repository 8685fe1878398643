"""X-API-Key: open without keys; with keys every route but /health/* (and, by default, docs)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.auth import key_is_valid, path_is_open
from service.settings import Settings

KEYS = ["alpha-key", "beta-key"]


def make_client(tmp_path, **overrides) -> TestClient:
    settings = Settings(data_dir=tmp_path, api_keys=KEYS, **overrides)
    return TestClient(create_app(settings))


@pytest.fixture()
def client(tmp_path):
    with make_client(tmp_path) as test_client:
        yield test_client


@pytest.mark.parametrize("path", ["/version", "/metrics", "/models", "/no/such/route"])
def test_protected_routes_need_a_key(client, path):
    response = client.get(path)
    assert response.status_code == 401
    body = response.json()
    assert body["code"] == "UNAUTHORIZED"
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert response.headers["WWW-Authenticate"] == "X-API-Key"


def test_wrong_key_is_401_and_not_echoed(client):
    response = client.get("/version", headers={"X-API-Key": "alpha-key-but-longer"})
    assert response.status_code == 401
    assert "alpha-key-but-longer" not in response.text
    assert "invalid" in response.json()["error"]


@pytest.mark.parametrize("key", KEYS)
def test_each_configured_key_is_accepted(client, key):
    assert client.get("/version", headers={"X-API-Key": key}).status_code == 200
    assert client.get("/metrics", headers={"X-API-Key": key}).status_code == 200


@pytest.mark.parametrize("path", ["/health/live", "/health/ready"])
def test_health_is_open(client, path):
    assert client.get(path).status_code == 200


def test_docs_are_open_by_default(client):
    assert client.get("/docs").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/docs/static/swagger-ui-bundle.js").status_code == 200


def test_docs_can_be_put_behind_the_key(tmp_path):
    with make_client(tmp_path, public_docs=False) as client:
        assert client.get("/docs").status_code == 401
        assert client.get("/openapi.json").status_code == 401
        assert client.get("/docs/static/swagger-ui.css").status_code == 401
        headers = {"X-API-Key": KEYS[0]}
        assert client.get("/openapi.json", headers=headers).status_code == 200


def test_no_keys_means_open(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        assert client.get("/version").status_code == 200


def test_unauthenticated_large_body_is_refused_before_it_is_read(tmp_path):
    with make_client(tmp_path, max_body_mb=0.001) as client:
        response = client.post("/predict", content=b"x" * 10_000)
        assert response.status_code == 401


def test_key_is_valid_rules():
    settings = Settings(api_keys="one, two")
    assert settings.api_keys == ["one", "two"]
    assert key_is_valid(settings, "two")
    assert not key_is_valid(settings, "tw")
    assert not key_is_valid(settings, "")
    assert not key_is_valid(settings, None)
    assert key_is_valid(Settings(api_keys=[]), None)


def test_open_paths():
    settings = Settings(api_keys=["k"])
    assert path_is_open(settings, "/health/live")
    assert not path_is_open(settings, "/healthz")
    assert not path_is_open(settings, "/version")
    assert path_is_open(settings, "/docs")
    assert not path_is_open(Settings(api_keys=["k"], public_docs=False), "/openapi.json")


def test_openapi_declares_the_key_on_protected_routes_only(client):
    doc = client.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["APIKeyHeader"]["name"] == "X-API-Key"
    assert "security" not in doc["paths"]["/health/live"]["get"]
    assert doc["paths"]["/version"]["get"]["security"] == [{"APIKeyHeader": []}]
    assert "401" in doc["paths"]["/version"]["get"]["responses"]
