"""Fixtures of the service tests: an app on a temporary model dir, data, and request helpers."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_iris

from service.api.app import create_app
from service.settings import Settings
from tests.service.postgres_server import PostgresServer, fresh_database, postgres_server
from tests.service.tcp_proxy import TcpProxy

BUCKET = "bsvm-test"


@pytest.fixture(scope="session")
def iris() -> tuple[np.ndarray, np.ndarray]:
    """Iris with string labels."""
    data = load_iris()
    return data.data, np.asarray(data.target_names)[data.target]


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh model dir."""
    return Settings(data_dir=tmp_path, log_level="warning")


@pytest.fixture()
def make_client(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """Factory of started TestClients: ``make_client(**settings_overrides)``; all closed at teardown."""
    opened: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        values = {"data_dir": tmp_path, "log_level": "warning", **overrides}
        client = TestClient(create_app(Settings(**values)))
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in reversed(opened):
        client.__exit__(None, None, None)


@pytest.fixture()
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """A client over an app with default limits on a temporary model dir."""
    return make_client()


@pytest.fixture(scope="module")
def module_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One client for a whole test module, over an app with default limits on a model dir of its
    own: built and migrated once. For tests that leave the app as they found it (they read, or add
    models under names no other test of the module looks up); a module whose tests all do so
    rebinds ``client`` to it."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("app"), log_level="warning")
    with TestClient(create_app(settings)) as client:
        yield client


def train_body(X: np.ndarray, y: np.ndarray, model_type: str = "lda", **extra: Any) -> dict:
    """A ``POST /train`` JSON body."""
    return {"model_type": model_type, "X": X.tolist(), "y": list(map(str, y)), **extra}


def wait_for_job(client: TestClient, job_id: str, timeout_s: float = 120.0) -> dict:
    """Poll ``GET /jobs/{id}`` until the job is finished; return its last view."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout_s} s")


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on a free loopback port with fake credentials and one bucket."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
            yield endpoint
        finally:
            server.stop()


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[str]:
    """A real PostgreSQL server for the session (initdb + pg_ctl); its admin URL."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="module")
def stoppable_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the module's own, which its fault tests stop and start again."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture()
def s3_proxy(s3_endpoint: str) -> Iterator[TcpProxy]:
    """A ``TcpProxy`` in front of the moto S3 server (``proxy.url`` is the endpoint to use)."""
    proxy = TcpProxy(int(s3_endpoint.rsplit(":", 1)[1]))
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty registry database: an SQLite file, or a fresh database on the real server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return fresh_database(request.getfixturevalue("postgres_admin"))


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Any]:
    """Two single-thread Dask worker processes, not daemonic (a fit starts its own process) for
    the cluster's whole life: a worker the nanny starts again after a kill reads the setting then."""
    import dask
    import distributed

    with dask.config.set({"distributed.worker.daemon": False}):
        local = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        try:
            yield local
        finally:
            local.close()


@pytest.fixture(scope="module")
def dask_watcher(dask_cluster: Any) -> Iterator[Any]:
    """The test's own client of ``dask_cluster`` (it holds no data)."""
    import distributed

    with distributed.Client(dask_cluster.scheduler_address, set_as_default=False) as client:
        yield client
