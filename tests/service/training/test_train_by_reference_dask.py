"""Training by reference on a Dask LocalCluster (worker processes): partitions read on the
workers; a worker killed mid-fit (the other one, or the one running the fit); a cancel that
stops the cluster's tasks.

The memory limits are tested in ``test_reference_memory.py`` (workers smaller than the data set).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import wait_for_job
from tests.service.training.test_train_by_reference import in_memory

pytestmark = pytest.mark.slow

N_ROWS, N_FEATURES, N_FILES = 40_000, 10, 8
EM = {"tol": 1e-12, "max_iter": 400}
"""An EM fit of many passes (one per iteration), so that it is still running when the test acts
(``fit_running``)."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    root = tmp_path_factory.mktemp("dask-data")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    y = np.where(X @ np.linspace(-1, 1, N_FEATURES) + rng.normal(size=N_ROWS) > 0, 1, 0)
    for i, rows in enumerate(np.array_split(np.arange(N_ROWS), N_FILES)):
        table = pa.table({**{f"f{j}": X[rows, j] for j in range(N_FEATURES)}, "label": y[rows]})
        pq.write_table(table, root / f"part-{i}.parquet")
    return root, X, y


@pytest.fixture(scope="module")
def cluster(dask_cluster: Any) -> Any:
    return dask_cluster


@pytest.fixture(scope="module")
def watcher(dask_watcher: Any) -> Any:
    return dask_watcher


@pytest.fixture(scope="module")
def client(cluster: Any, data: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("app"),
        log_level="warning",
        data_urls=f"file://{data[0]}/",
        dask_scheduler=cluster.scheduler_address,
        job_lease_s=2,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def body(root: Path, model_type: str, name: str, **extra: Any) -> dict[str, Any]:
    data = {"uri": f"file://{root}/", "format": "parquet", "target": "label"}
    return {"model_type": model_type, "name": name, "data": data, **extra}


def start(client: TestClient, payload: dict[str, Any]) -> str:
    answer = client.post("/train", json=payload)
    assert answer.status_code == 202, answer.text
    return answer.json()["job_id"]


def fit_running(watcher: Any, client: TestClient, job_id: str) -> tuple[str, str]:
    """(worker, key) of the job's fit task once it runs with its partitions loaded on the cluster.

    Read from the scheduler every 10 ms, not from the job's view (its progress is written with
    the lease, up to a renewal late): on a quiet machine the whole fit takes well under a second.
    """
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        processing = watcher.processing()
        fits = [(w, k) for w, keys in processing.items() for k in keys if str(k).endswith("-fit")]
        held = watcher.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        if fits and held > 1:  # the fit, and the partitions it reads
            return fits[0]
        job = client.get(f"/jobs/{job_id}").json()
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.01)
    raise AssertionError("the fit task never ran with its partitions loaded")


def settled(watcher: Any) -> bool:
    """No task processing anywhere on the cluster, and the scheduler holds no task."""
    busy = any(watcher.processing().values())
    held = watcher.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
    return not busy and held == 0


def wait_until(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the cluster did not settle"
        time.sleep(0.1)


def assert_predicts_as_in_memory(
    client: TestClient, model_id: str, name: str, X: Any, y: Any
) -> None:
    """The stored model's decision values, predicted by ``name``, on every 200th row equal those
    of the same model fitted in memory on the same rows."""
    expected = in_memory(client.get(f"/models/{model_id}").json(), X, y)
    rows = X[::200]
    answer = client.post(
        "/predict",
        json={"model": name, "X": rows.tolist(), "outputs": ["decision_function"]},
    )
    assert answer.status_code == 200, answer.text
    np.testing.assert_allclose(
        answer.json()["decision_function"], expected.decision_function(rows), rtol=1e-5, atol=1e-6
    )


def test_lda_fits_on_the_workers(client: TestClient, data: Any) -> None:
    root = data[0]
    job_id = start(
        client,
        body(root, "lda", "dask-ref", evaluation={"test_fraction": 0.25, "random_state": 1}),
    )
    job = wait_for_job(client, job_id, timeout_s=180)
    assert job["status"] == "succeeded", job
    record = client.get(f"/models/{job['model_id']}").json()
    assert record["training"]["partitions"] == 6  # two of eight files held out
    assert record["metrics"]["heldout"]["n_samples"] == N_ROWS // 4
    assert record["metrics"]["train"]["accuracy"] > 0.8
    assert record["data"]["rows"] == N_ROWS
    detail = job["progress_detail"]
    assert job["progress"] == 1.0 and detail["stage"] == "evaluating"
    assert detail["partitions_done"] == detail["partitions"]


def test_a_worker_killed_mid_fit(client: TestClient, watcher: Any, data: Any) -> None:
    """SIGKILL to the worker that does not run the fit's task: its partitions are read again
    elsewhere (the nanny starts a new worker) and the fit ends as the in-memory one."""
    root, X, y = data
    job_id = start(client, body(root, "em_svm", "dask-killed", params=EM))
    host, _ = fit_running(watcher, client, job_id)
    victim = next(w for w in watcher.scheduler_info()["workers"] if w != host)
    pid = watcher.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    job = wait_for_job(client, job_id, timeout_s=300)
    assert job["status"] == "succeeded", job
    assert_predicts_as_in_memory(client, job["model_id"], "dask-killed", X, y)


def test_a_cancel_stops_the_cluster_s_tasks(client: TestClient, watcher: Any, data: Any) -> None:
    root, _, _ = data
    wait_until(lambda: settled(watcher))
    job_id = start(client, body(root, "em_svm", "dask-cancelled", params=EM))
    fit_running(watcher, client, job_id)
    assert not settled(watcher)  # the fit and its partitions are on the workers
    cancelled = client.delete(f"/jobs/{job_id}")
    assert cancelled.status_code == 200
    job = wait_for_job(client, job_id)
    assert job["status"] == "cancelled", job
    wait_until(lambda: settled(watcher))  # the fit's process is gone, and its tasks with it
    assert client.get("/models/dask-cancelled").status_code == 404


def attempts(client: TestClient, job_id: str) -> int:
    """How many times the service claimed the job (the lease rule's count)."""
    from sqlalchemy import select

    from service.repository.jobs import jobs

    job_store = client.app.state.jobs.job_store
    with job_store.db.read() as conn:
        return conn.execute(select(jobs.c.attempts).where(jobs.c.job_id == job_id)).scalar_one()


def test_the_fit_s_own_worker_killed(client: TestClient, watcher: Any, data: Any) -> None:
    """SIGKILL to the worker that runs the fit's task: the fit's process exits with its parent
    (``worker.exit_with_parent``), the scheduler runs the task again on a live worker (Dask's
    ``allowed-failures``), and the job ends as the in-memory fit; no lease is lost, since the
    service's process lives. Only the complete model is stored."""
    root, X, y = data
    wait_until(lambda: settled(watcher))
    job_id = start(client, body(root, "em_svm", "dask-fit-killed", params=EM))
    host, _ = fit_running(watcher, client, job_id)
    pid = watcher.run(os.getpid, workers=[host])[host]
    os.kill(pid, signal.SIGKILL)
    job = wait_for_job(client, job_id, timeout_s=300)
    assert job["status"] == "succeeded", job
    # its first run died with the worker, so it succeeded by running again on the cluster (the
    # scheduler's story of the key is not kept reliably enough to count the runs), not by a
    # re-queue of the service
    assert host not in watcher.scheduler_info()["workers"]  # that worker is gone (its nanny's
    assert attempts(client, job_id) == 1  # new one has another address)
    versions = client.get("/models/dask-fit-killed/versions").json()
    assert [v["version"] for v in versions["items"]] == [1], versions
    assert_predicts_as_in_memory(client, job["model_id"], "dask-fit-killed", X, y)
    wait_until(lambda: settled(watcher))  # the killed fit's process left nothing on the cluster
