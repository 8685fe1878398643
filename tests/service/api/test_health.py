"""Liveness, readiness (503 until the store is usable and the registry read) and versions."""

from __future__ import annotations

import gc
import importlib.metadata
import platform

from fastapi.testclient import TestClient

from service import __version__
from service.api.app import create_app
from service.settings import Settings


def test_live(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        response = client.get("/health/live")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_when_store_and_registry_are_there(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        response = client.get("/health/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["checks"] == {"database": True, "store": True, "registry": True}
    assert {"lda", "qda"} <= set(body["model_types"])


def test_not_ready_before_the_store_is_opened(tmp_path):
    client = TestClient(create_app(Settings(data_dir=tmp_path)))  # lifespan not run: no store
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["checks"]["store"] is False
    assert int(response.headers["Retry-After"]) > 0


def test_not_ready_when_the_model_dir_goes_away(tmp_path):
    model_dir = tmp_path / "models"
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        assert client.get("/health/ready").status_code == 200
        model_dir.rmdir()
        model_dir.write_text("not a folder any more")
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json()["status"] == "not_ready"


def test_not_ready_without_registry(tmp_path):
    app = create_app(Settings(data_dir=tmp_path))
    with TestClient(app) as client:
        app.state.model_types = None
        response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["checks"]["registry"] is False


def test_version_reports_installed_libraries(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        body = client.get("/version").json()
    assert body["service"] == __version__
    assert body["python"] == platform.python_version()
    for name in ("numpy", "scipy", "scikit-learn", "fastapi"):
        assert body["libraries"][name] == importlib.metadata.version(name)


def test_startup_objects_are_frozen_while_the_app_runs(tmp_path):
    gc.unfreeze()
    with TestClient(create_app(Settings(data_dir=tmp_path, log_level="warning"))) as client:
        assert client.get("/health/live").status_code == 200
        assert gc.get_freeze_count() > 10_000  # the modules, the app, the store
    assert gc.get_freeze_count() == 0  # given back to the collector when the app stops
