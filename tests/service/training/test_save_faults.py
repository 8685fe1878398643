"""Saves that meet a back-end outage: acknowledged trainings keep their model and store it later.

moto's S3 server (or PostgreSQL) sits behind ``TcpProxy``; the proxy refuses connections while
trainings finish, then lets them through again. Every training acknowledged with 202 must end
``succeeded`` with its model stored once; a synchronous training during the outage answers 503
with Retry-After; nothing stays ``running``; no artifact is left without its row.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import boto3
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from service.api.app import create_app
from service.repository.tables import job_results, jobs
from service.settings import Settings
from tests.service.conftest import BUCKET, train_body
from tests.service.slow_estimator import slow_task
from tests.service.tcp_proxy import TcpProxy
from tests.service.training.test_jobs import make_queue, wait_done

pytestmark = pytest.mark.slow

ACKNOWLEDGED = 6
STORE_TIMEOUT_S = 1.5
"""A refused save attempt ends within this (as in ``test_outages``), not after botocore's and
s3fs's own retries (2 to 6 s each here, most of these tests' time)."""
ACTIVE = ("queued", "running")


@pytest.fixture()
def proxy(s3_endpoint: str) -> Iterator[TcpProxy]:
    port = int(s3_endpoint.rsplit(":", 1)[1])
    proxy = TcpProxy(port)
    yield proxy
    proxy.close()


def proxied_settings(tmp_path, proxy: TcpProxy, **overrides) -> Settings:
    """A server storing through ``proxy``; each store call bounded by ``STORE_TIMEOUT_S``."""
    prefix = uuid.uuid4().hex
    return Settings(
        data_dir=tmp_path,
        artifact_url=f"s3://{BUCKET}/{prefix}",
        s3_endpoint_url=proxy.url,
        store_timeout_s=STORE_TIMEOUT_S,
        log_level="warning",
        max_queued=64,
        **overrides,
    )


def objects(s3_endpoint: str, settings: Settings) -> set[str]:
    """The model ids that have an object under the settings' prefix (moto, not through the proxy)."""
    prefix = settings.artifacts_url.removeprefix(f"s3://{BUCKET}/")
    listed = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(
        Bucket=BUCKET, Prefix=prefix + "/"
    )
    return {item["Key"].split("/")[1] for item in listed.get("Contents", [])}


def kept_rows(client: TestClient) -> int:
    with client.app.state.store.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(job_results)).scalar() or 0)


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


def test_acknowledged_trainings_survive_a_store_that_refuses(tmp_path, proxy, iris, s3_endpoint):
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
        assert objects(s3_endpoint, settings) == {v["model_id"] for v in views}  # no debris
        assert kept_rows(client) == 0  # the kept models went with their jobs' ends


def test_a_save_that_outlasts_its_retries_fails_naming_the_store(
    tmp_path, proxy, iris, s3_endpoint
):
    X, y = iris
    settings = proxied_settings(tmp_path, proxy, save_retry_s=2)
    with TestClient(create_app(settings)) as client:
        with proxy.fault("refuse"):
            job_id = client.post("/train", json=train_body(X, y, background=True)).json()["job_id"]
            view = wait_all(client, [job_id], timeout_s=120)[0]
        assert view["status"] == "failed" and view["model_id"] is None
        assert view["error"]["code"] == "STORE_UNAVAILABLE"
        assert "BSVM_SAVE_RETRY_S" in view["error"]["message"]
        assert client.get("/models").json()["total"] == 0
        assert kept_rows(client) == 0
        client.app.state.store.sweep(0)
        assert objects(s3_endpoint, settings) == set()


def test_a_process_that_takes_the_job_over_stores_the_kept_model_without_fitting(
    tmp_path, proxy, s3_endpoint
):
    settings = proxied_settings(tmp_path, proxy, save_retry_s=600)
    first = make_queue(settings)
    pid_file = tmp_path / "pid"
    job_id = first.submit(slow_task(name="kept", pid_file=str(pid_file)))["job_id"]
    with proxy.fault("refuse"):
        deadline = time.monotonic() + 120
        while first.job_store.kept_result(job_id) is None:  # fitted; the save failed
            assert time.monotonic() < deadline and first.get(job_id)["status"] in ACTIVE
            time.sleep(0.05)
        kept_id = first.job_store.kept_result(job_id)[0]
        first.shutdown()  # as a deploy stops a replica: the job goes back to the queue
    assert first.get(job_id)["status"] == "queued"
    pid_file.unlink()
    second = make_queue(settings)
    try:
        view = wait_done(second, job_id)
        assert view["status"] == "succeeded" and view["model_id"] == kept_id
        assert not pid_file.exists()  # stored what the first fitted: no second fit
        assert second.store.list_records(name="kept")[1] == 1
        assert second.store.load(kept_id).predict([[0.0, 0.0]]).tolist() == [0]
        assert second.job_store.kept_result(job_id) is None
        assert objects(s3_endpoint, settings) == {kept_id}
    finally:
        second.shutdown()


def test_a_training_survives_a_database_that_refuses_during_its_row_write(tmp_path, postgres_admin):
    from tests.service.postgres_server import fresh_database

    url = fresh_database(postgres_admin)
    host_port = url.rpartition("@")[2].partition("/")[0]
    proxy = TcpProxy(int(host_port.rsplit(":", 1)[1]))
    proxied = url.replace(host_port, f"127.0.0.1:{proxy.port}")
    # a long lease: the job must end by its own retries, not by being run again after it expires
    settings = Settings(
        data_dir=tmp_path, database_url=proxied, log_level="warning", job_lease_s=600
    )
    queue = make_queue(settings)
    pid_file = tmp_path / "pid"
    try:
        job_ids = [
            queue.submit(slow_task(name="db", seconds=1.0, pid_file=str(pid_file)))["job_id"]
            for _ in range(2)
        ]
        deadline = time.monotonic() + 120
        while not pid_file.exists():  # a fit is under way: the database is not needed now
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with proxy.fault("refuse"):
            time.sleep(4.0)  # both fits end and try to write their rows meanwhile
        views = [wait_done(queue, j) for j in job_ids]
        assert [v["status"] for v in views] == ["succeeded"] * 2, views
        with queue.db.read() as conn:
            tried = conn.execute(select(jobs.c.attempts).where(jobs.c.job_id.in_(job_ids)))
            assert [a for (a,) in tried] == [1, 1]  # each fitted once
        items, total = queue.store.list_records(name="db")
        assert total == 2 and {m["model_id"] for m in items} == {v["model_id"] for v in views}
        models = settings.models_path
        assert {p.name for p in models.glob("m_*") if any(p.iterdir())} == {
            v["model_id"] for v in views
        }
    finally:
        queue.shutdown()
        proxy.close()
