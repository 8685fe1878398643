"""The whole service on its scaled back ends: PostgreSQL registry and S3 artifacts (moto server)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import BUCKET, train_body, wait_for_job
from tests.service.postgres_server import fresh_database


@pytest.fixture()
def scaled_settings(postgres_admin, s3_endpoint, tmp_path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database_url=fresh_database(postgres_admin),
        artifact_url=f"s3://{BUCKET}/{uuid.uuid4().hex}",
        s3_endpoint_url=s3_endpoint,
        log_level="warning",
    )


def test_train_predict_alias_delete_on_postgres_and_s3(scaled_settings, iris, tmp_path):
    X, y = iris
    with TestClient(create_app(scaled_settings)) as a, TestClient(create_app(scaled_settings)) as b:
        assert a.get("/health/ready").json()["checks"]["store"] is True
        first = a.post("/train", json=train_body(X, y, name="iris")).json()
        job = b.post("/train", json=train_body(X, y, name="iris", background=True)).json()
        second = wait_for_job(a, job["job_id"])  # a job made on b is seen on a
        assert (first["version"], a.get(f"/models/{second['model_id']}").json()["version"]) == (
            1,
            2,
        )
        assert b.put("/models/by-name/iris/aliases/stable", json={"version": 1}).status_code == 200
        rows = X[::10].tolist()
        on_a = a.post("/predict", json={"model": "iris@stable", "X": rows}).json()
        on_b = b.post("/predict", json={"model": first["model_id"], "X": rows}).json()
        assert on_a["model_id"] == first["model_id"] and on_a["predictions"] == on_b["predictions"]
        assert np.mean(np.asarray(on_a["predictions"]) == y[::10]) > 0.9
        assert b.get("/models", params={"name": "iris"}).json()["total"] == 2
        assert a.delete(f"/models/{first['model_id']}").status_code == 204
        assert b.post("/predict", json={"model": "iris@stable", "X": rows}).status_code == 404
        assert b.post("/predict", json={"model": "iris", "X": rows}).json()["version"] == 2
    assert not (tmp_path / "models").exists()  # the artifacts went to S3, not to the data dir
