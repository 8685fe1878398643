"""A missing artifact and a refused one, as the two predict entries answer them, on moto's S3."""

from __future__ import annotations

import json

import boto3
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from service.model_types import model_types
from service.repository.tables import models
from tests.service.conftest import BUCKET, train_body


@pytest.fixture()
def s3_client(make_client, s3_endpoint, tmp_path) -> TestClient:
    return make_client(artifact_url=f"s3://{BUCKET}/{tmp_path.name}", s3_endpoint_url=s3_endpoint)


def trained(client: TestClient, iris, name: str, model_type: str = "lda") -> str:
    X, y = iris
    r = client.post("/train", json={**train_body(X, y, model_type), "name": name})
    assert r.status_code == 201, r.text
    return r.json()["model_id"]


def forget(client: TestClient) -> None:
    """As after a restart: nothing loaded in memory."""
    client.app.state.store.cache.clear()


def predicts(client: TestClient, ref: str, X: np.ndarray) -> list:
    v2 = {"inputs": [{"name": "x", "shape": list(X.shape), "datatype": "FP64", "data": X.tolist()}]}
    return [
        client.post("/predict", json={"model": ref, "X": X.tolist()}),
        client.post(f"/v2/models/{ref}/infer", json=v2),
    ]


def test_a_deleted_object_answers_404_artifact_missing(s3_client, s3_endpoint, iris, tmp_path):
    model_id = trained(s3_client, iris, "gone")
    forget(s3_client)
    boto3.client("s3", endpoint_url=s3_endpoint).delete_object(
        Bucket=BUCKET, Key=f"{tmp_path.name}/{model_id}/model.joblib"
    )
    for r in predicts(s3_client, "gone", iris[0][:3]):
        assert r.status_code == 404, r.text
        body = r.json()
        assert body["code"] == "ARTIFACT_MISSING" and model_id in body["error"]


def test_bytes_swapped_between_models_answer_409_artifact_refused(
    s3_client, s3_endpoint, iris, tmp_path
):
    """The issue's case: an lda record given a kernel SVM's signed bytes and digest."""
    x = trained(s3_client, iris, "x", "lda")
    y = trained(s3_client, iris, "y", "kernel_svm")
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    key = f"{tmp_path.name}/{{}}/model.joblib"
    blob = s3.get_object(Bucket=BUCKET, Key=key.format(y))["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=key.format(x), Body=blob)
    store = s3_client.app.state.store
    with store.db.write() as conn:
        rows = {
            r.model_id: json.loads(r.record)
            for r in conn.execute(select(models.c.model_id, models.c.record))
        }
        moved = {k: rows[y][k] for k in ("artifact_sha256", "artifact_digest")}
        conn.execute(
            update(models)
            .where(models.c.model_id == x)
            .values(record=json.dumps({**rows[x], **moved}))
        )
    store._records.clear()
    forget(s3_client)
    for r in predicts(s3_client, "x", iris[0][:3]):
        assert r.status_code == 409, r.text
        assert r.json()["code"] == "ARTIFACT_REFUSED"


SMALL = {"mcmc_svm": {"n_draws": 20, "burn_in": 5, "n_chains": 1},
         "spike_slab_svm": {"n_draws": 20, "burn_in": 5, "n_chains": 1}}  # fmt: skip


@pytest.mark.parametrize("model_type", sorted(model_types()))
def test_every_type_signed_before_binding_still_serves(make_client, iris, model_type):
    """A row of the previous scheme (HMAC of the bytes alone) of every model type loads, predicts
    as before and is re-signed under the bound scheme."""
    client = make_client()
    X, y = iris[0], (iris[1] == "setosa").astype(int)
    body = {**train_body(X, y, model_type), "name": "old", "params": SMALL.get(model_type, {})}
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    model_id = r.json()["model_id"]
    store = client.app.state.store
    before = client.post("/predict", json={"model": model_id, "X": X[:5].tolist()}).json()
    blob = store.artifacts.get(model_id)
    with store.db.write() as conn:
        rec = json.loads(
            conn.execute(select(models.c.record).where(models.c.model_id == model_id)).scalar()
        )
        rec["artifact_sha256"], rec["artifact_digest"] = store.signer.digest(blob), "hmac-sha256"
        conn.execute(
            update(models).where(models.c.model_id == model_id).values(record=json.dumps(rec))
        )
    store._records.clear()
    forget(client)
    again = client.post("/predict", json={"model": model_id, "X": X[:5].tolist()})
    assert again.status_code == 200, again.text
    assert again.json()["predictions"] == before["predictions"]
    assert store.get_record(model_id)["artifact_digest"] == "hmac-sha256-v2"
