"""The whole service while a back end is down or hangs, on the real components.

PostgreSQL is stopped with ``pg_ctl stop -m immediate`` and started again under traffic; moto's S3
server sits behind a proxy that refuses connections, then accepts them and never answers. What
must hold: no 5xx but 503, every 503 an envelope with ``Retry-After`` and a code naming the back
end; predicts of loaded models answered from memory; ``/health/ready`` answering 503 in bounded
time; the outage on the access lines and in the metrics; everything back once the back end is.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import BUCKET, train_body
from tests.service.postgres_server import PostgresServer, fresh_database
from tests.service.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

BOUND_S = 60.0
"""Longest wait on any one request or recovery (a bound, never a timing assertion)."""
FAULT_TIMEOUT_S = 0.5
"""The store timeout while the store refuses or hangs: every call then waits it out (refused
connections are retried by botocore and s3fs until it ends). Outside the fault the servers keep
1.5 s, so a store call of a loaded machine does not time out."""

Call = Callable[[TestClient], httpx.Response]


def bounded(call: Call, client: TestClient) -> httpx.Response:
    """``call(client)`` in a thread, waited for at most ``BOUND_S``."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, client).result(timeout=BOUND_S)


def until(check: Callable[[], bool]) -> None:
    """Poll ``check`` until it is true, for at most ``BOUND_S``."""
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, "not back within the bound"
        time.sleep(0.1)


def assert_outage_envelope(response: httpx.Response, code: str) -> None:
    """A 503 envelope naming the back end, with ``Retry-After``."""
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == code and body["request_id"] == response.headers["X-Request-ID"]
    assert int(response.headers["Retry-After"]) > 0


def v2_body(rows: list[list[float]]) -> dict[str, Any]:
    """A V2 inference request of ``rows`` as one FP64 tensor."""
    data = [value for row in rows for value in row]
    return {"inputs": [{"name": "x", "shape": [len(rows), 4], "datatype": "FP64", "data": data}]}


def predicts(rows: list[list[float]], model_id: str) -> dict[str, Call]:
    """A predict of the loaded model by id, name and alias, and the V2 infer of its name."""
    return {
        "predict id": lambda c: c.post("/predict", json={"model": model_id, "X": rows}),
        "predict name": lambda c: c.post("/predict", json={"model": "iris", "X": rows}),
        "predict alias": lambda c: c.post("/predict", json={"model": "iris@stable", "X": rows}),
        "v2 infer": lambda c: c.post("/v2/models/iris/infer", json=v2_body(rows)),
    }


def access_fields(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.fields for r in caplog.records if r.name == "service.access"]


def met_on_every_route(
    seen: list[tuple[str, bool, httpx.Response]], loaded: dict[str, Call], others: dict[str, Call]
) -> bool:
    """Every loaded-model route answered 200, and every other route 503, while the database was
    down."""
    during = Counter((name, r.status_code) for name, was_down, r in list(seen) if was_down)
    return all(during[(name, 200)] for name in loaded) and all(
        during[(name, 503)] for name in others
    )


@pytest.fixture()
def pg_client(stoppable_postgres: PostgresServer, tmp_path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=fresh_database(stoppable_postgres.url),
        job_lease_s=2,
        log_level="warning",
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client
    if not stoppable_postgres.is_running():  # a failed test leaves it running for the next
        stoppable_postgres.start()


def test_postgres_stopped_and_started_under_traffic(pg_client, stoppable_postgres, iris, caplog):
    client = pg_client
    X, y = iris
    model_id = client.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    assert client.put("/models/by-name/iris/aliases/stable", json={"version": 1}).status_code == 200
    loaded = predicts(X[::30].tolist(), model_id)
    for call in loaded.values():  # loads the model and gives the registry its answers
        assert call(client).status_code == 200
    others: dict[str, Call] = {
        "list models": lambda c: c.get("/models"),
        "get model": lambda c: c.get(f"/models/{model_id}"),
        "list jobs": lambda c: c.get("/jobs"),
        "aliases": lambda c: c.get("/models/by-name/iris/aliases"),
        "train background": lambda c: c.post(
            "/train", json=train_body(X, y, name="bg", background=True)
        ),
    }
    seen: list[tuple[str, bool, httpx.Response]] = []
    down = threading.Event()
    stop = threading.Event()

    def traffic(calls: dict[str, Call]) -> None:
        while not stop.is_set():
            for name, call in calls.items():
                was_down = down.is_set()
                response = call(client)
                seen.append((name, was_down and down.is_set(), response))

    with caplog.at_level(logging.INFO, logger="service.access"):
        threads = [threading.Thread(target=traffic, args=(c,)) for c in (loaded, others)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.5)
            stoppable_postgres.stop("immediate")
            down.set()
            time.sleep(1.0)  # past the registry's kept period: every lookup meets the outage
            ready = bounded(lambda c: c.get("/health/ready"), client)
            sync_train = bounded(
                lambda c: c.post("/train", json=train_body(X, y, name="s")), client
            )
            until(lambda: met_on_every_route(seen, loaded, others))  # the traffic of the outage
            down.clear()
            stoppable_postgres.start()
            until(lambda: client.get("/models").status_code == 200)
            time.sleep(0.5)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=BOUND_S)
    statuses = Counter((name, r.status_code) for name, _, r in seen)
    assert {status for _, status in statuses} <= {200, 202, 503}, statuses
    for _, _, response in seen:
        if response.status_code == 503:
            assert_outage_envelope(response, "DATABASE_UNAVAILABLE")
    during = Counter((name, r.status_code) for name, was_down, r in seen if was_down)
    for name in loaded:  # served from memory all through the outage
        assert statuses[(name, 503)] == 0 and during[(name, 200)] > 0, statuses
    for name in others:
        assert during[(name, 503)] > 0, during  # the outage was met on every other route
    assert ready.status_code == 503 and ready.json()["checks"]["database"] is False
    assert int(ready.headers["Retry-After"]) > 0
    assert_outage_envelope(sync_train, "DATABASE_UNAVAILABLE")
    fields = access_fields(caplog)
    assert any(f.get("backend") == "database" and f["status"] == 503 for f in fields)
    assert any(f.get("stale") and f["status"] == 200 for f in fields)
    metrics = client.get("/metrics").text
    assert 'bsvm_backend_unavailable_total{backend="database",route="/models"}' in metrics
    assert 'bsvm_stale_answers_total{route="/predict"}' in metrics
    assert client.get("/health/ready").status_code == 200
    for call in loaded.values():
        assert call(client).status_code == 200


@pytest.fixture()
def store_pair(s3_proxy: TcpProxy, tmp_path) -> Iterator[tuple[TestClient, TestClient]]:
    """Two replicas on one SQLite registry and one S3 prefix reached through the proxy."""
    settings = Settings(
        data_dir=tmp_path,
        artifact_url=f"s3://{BUCKET}/{uuid.uuid4().hex}",
        s3_endpoint_url=s3_proxy.url,
        store_timeout_s=1.5,
        log_level="warning",
    )
    with (
        TestClient(create_app(settings), raise_server_exceptions=False) as a,
        TestClient(create_app(settings), raise_server_exceptions=False) as b,
    ):
        yield a, b


@contextlib.contextmanager
def store_timeout(client: TestClient, seconds: float) -> Iterator[None]:
    """The server's artifact store bounds each call by ``seconds`` for the block (its
    ``BSVM_STORE_TIMEOUT_S``, read at every call), then by its setting again."""
    artifacts = client.app.state.store.artifacts
    configured, artifacts.timeout_s = artifacts.timeout_s, seconds
    try:
        yield
    finally:
        artifacts.timeout_s = configured


@pytest.mark.parametrize("mode", ["refuse", "hang"])
def test_store_refusing_or_hanging(store_pair, s3_proxy, iris, mode, caplog):
    a, b = store_pair
    X, y = iris
    rows = X[::30].tolist()
    model_id = a.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    assert a.put("/models/by-name/iris/aliases/stable", json={"version": 1}).status_code == 200
    unloaded = a.post("/train", json=train_body(X, y, name="other")).json()["model_id"]
    loaded = predicts(rows, model_id)
    for call in loaded.values():
        assert call(b).status_code == 200  # b loads iris, never other
    not_loaded: dict[str, Call] = {
        "predict id": lambda c: c.post("/predict", json={"model": unloaded, "X": rows}),
        "predict name": lambda c: c.post("/predict", json={"model": "other", "X": rows}),
        "v2 infer": lambda c: c.post("/v2/models/other/infer", json=v2_body(rows)),
    }
    with (
        caplog.at_level(logging.INFO, logger="service.access"),
        s3_proxy.fault(mode),
        store_timeout(b, FAULT_TIMEOUT_S),
    ):
        ready = bounded(lambda c: c.get("/health/ready"), b)
        assert ready.status_code == 503 and int(ready.headers["Retry-After"]) > 0
        assert ready.json()["checks"] == {"database": True, "store": False, "registry": True}
        assert bounded(lambda c: c.get("/v2/health/ready"), b).status_code == 503
        for call in loaded.values():
            assert bounded(call, b).status_code == 200
        for call in not_loaded.values():
            assert_outage_envelope(bounded(call, b), "STORE_UNAVAILABLE")
        assert bounded(lambda c: c.get("/models"), b).status_code == 200  # needs no store
        synchronous = bounded(lambda c: c.post("/train", json=train_body(X, y, name="s")), b)
        assert_outage_envelope(synchronous, "STORE_UNAVAILABLE")  # fitted, not storable
    fields = access_fields(caplog)
    assert sum(f.get("backend") == "store" for f in fields) == len(not_loaded) + 1
    metrics = b.get("/metrics").text
    assert 'bsvm_backend_unavailable_total{backend="store",route="/predict"} 2.0' in metrics
    until(lambda: b.get("/health/ready").status_code == 200)
    for call in not_loaded.values():
        assert call(b).status_code == 200
