"""Saves that meet a store outage: acknowledged trainings keep their model and store it later.

moto's S3 server sits behind ``TcpProxy``; the proxy refuses connections while trainings finish,
then lets them through again. Every training acknowledged with 202 must end ``succeeded`` with
its model stored once; a synchronous training during the outage answers 503 with Retry-After.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import BUCKET, train_body
from tests.service.tcp_proxy import TcpProxy

ACKNOWLEDGED = 6


@pytest.fixture()
def proxy(s3_endpoint: str) -> Iterator[TcpProxy]:
    port = int(s3_endpoint.rsplit(":", 1)[1])
    proxy = TcpProxy(port)
    yield proxy
    proxy.close()


def proxied_settings(tmp_path, proxy: TcpProxy, **overrides) -> Settings:
    return Settings(
        data_dir=tmp_path,
        artifact_url=f"s3://{BUCKET}/{uuid.uuid4().hex}",
        s3_endpoint_url=proxy.url,
        log_level="warning",
        max_queued=64,
        **overrides,
    )


def wait_all(client: TestClient, job_ids: list[str], timeout_s: float) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        views = [client.get(f"/jobs/{j}").json() for j in job_ids]
        if all(v["status"] not in ("queued", "running") for v in views):
            return views
        assert time.monotonic() < deadline, [v["status"] for v in views]
        time.sleep(0.1)


def started_saving(client: TestClient, job_ids: list[str], timeout_s: float) -> None:
    """Wait until every job's fit is over (progress 0.9 or more: its save has begun)."""
    deadline = time.monotonic() + timeout_s
    while True:
        views = [client.get(f"/jobs/{j}").json() for j in job_ids]
        if all(v["progress"] >= 0.9 or v["status"] not in ("queued", "running") for v in views):
            return
        assert time.monotonic() < deadline, [(v["status"], v["progress"]) for v in views]
        time.sleep(0.1)


def test_acknowledged_trainings_survive_a_store_that_refuses(tmp_path, proxy, iris):
    X, y = iris
    settings = proxied_settings(tmp_path, proxy, save_retry_s=120)
    statuses: Counter = Counter()
    with TestClient(create_app(settings)) as client:
        with proxy.fault("refuse"):
            job_ids = []
            for i in range(ACKNOWLEDGED):
                answer = client.post(
                    "/train", json=train_body(X, y, name=f"acked{i % 2}", background=True)
                )
                statuses[answer.status_code] += 1
                job_ids.append(answer.json()["job_id"])
            started_saving(client, job_ids, timeout_s=120)
            sync = client.post("/train", json=train_body(X, y, name="sync"))
            statuses[sync.status_code] += 1
            assert sync.status_code == 503, sync.text
            assert sync.headers["Retry-After"] and sync.json()["code"] == "STORE_UNAVAILABLE"
        views = wait_all(client, job_ids, timeout_s=180)
        assert [v["status"] for v in views] == ["succeeded"] * ACKNOWLEDGED, views
        stored = client.get("/models", params={"limit": 100}).json()
        assert stored["total"] == ACKNOWLEDGED  # each once; the refused sync training not at all
        assert {m["model_id"] for m in stored["items"]} == {v["model_id"] for v in views}
        for view in views:
            rows = {"model": view["model_id"], "X": X[:3].tolist()}
            assert client.post("/predict", json=rows).status_code == 200
        assert statuses == Counter({202: ACKNOWLEDGED, 503: 1})
