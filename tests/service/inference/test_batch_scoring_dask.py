"""Faults of a batch scoring on a Dask LocalCluster (worker processes), input and output on moto
S3: a cancel, and an input object deleted mid-job. Either way the job's tasks leave the cluster
and nothing is visible at the output prefix (no ``_SUCCESS``, no part file, nothing staged).

The model is an MCMC SVM of many draws scored with intervals, so that each partition takes a
while and the test acts while the job runs: after the first partition is written.
"""

from __future__ import annotations

import io
import re
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
from tests.service.conftest import BUCKET, train_body, wait_for_job

pytestmark = pytest.mark.slow

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
N_FILES, ROWS_PER_FILE = 16, 40_000
MCMC = {"alpha": 2.0, "nu": 1.0, "n_draws": 2000, "burn_in": 50, "n_chains": 2, "random_state": 0}
"""4,000 draws: an interval per row costs 4,000 decision values, about a second per partition."""


@pytest.fixture(scope="module")
def cluster(s3_endpoint: str, dask_cluster: Any) -> Any:
    """The shared two-worker cluster, started after the moto server (so its workers have its
    credentials)."""
    return dask_cluster


@pytest.fixture(scope="module")
def watcher(dask_watcher: Any) -> Any:
    return dask_watcher


@pytest.fixture(scope="module")
def s3(s3_endpoint: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)


@pytest.fixture(scope="module")
def client(
    cluster: Any, s3_endpoint: str, iris: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """An app scoring on the cluster, with ``iris-mcmc`` (trained in this process first)."""
    app_dir = tmp_path_factory.mktemp("batch-dask-app")
    settings = {
        "data_dir": app_dir,
        "log_level": "warning",
        "data_urls": f"s3://{BUCKET}/batch-dask/",
        "s3_endpoint_url": s3_endpoint,
    }
    with TestClient(create_app(Settings(**settings))) as local:
        X, y = iris
        binary = y != "setosa"
        body = train_body(
            X[binary], y[binary], "mcmc_svm", name="iris-mcmc", feature_names=FEATURES, params=MCMC
        )
        assert local.post("/train", json=body).status_code == 201
    dask_settings = Settings(**settings, dask_scheduler=cluster.scheduler_address)
    with TestClient(create_app(dask_settings)) as test_client:
        yield test_client


def put_inputs(s3: Any, prefix: str) -> list[str]:
    """``N_FILES`` Parquet files of iris-like rows under ``prefix``; their keys, in order."""
    rng = np.random.default_rng(0)
    keys = []
    for i in range(N_FILES):
        X = rng.normal(loc=[5.8, 3.0, 3.8, 1.2], scale=0.5, size=(ROWS_PER_FILE, 4))
        table = pa.table({"id": np.arange(ROWS_PER_FILE) + i * ROWS_PER_FILE})
        for j, name in enumerate(FEATURES):
            table = table.append_column(name, pa.array(X[:, j]))
        sink = io.BytesIO()
        pq.write_table(table, sink)
        keys.append(f"{prefix}in-{i:02d}.parquet")
        s3.pipe(keys[-1], sink.getvalue())
    return keys


def start(client: TestClient, name: str) -> str:
    body = {
        "model": "iris-mcmc",
        "input": {"uri": f"s3://{BUCKET}/batch-dask/{name}/in/", "format": "parquet"},
        "output": {"uri": f"s3://{BUCKET}/batch-dask/{name}/out/", "format": "parquet"},
        "outputs": ["predictions", "intervals"],
        "keep_columns": ["id"],
        "level": 0.9,
    }
    answer = client.post("/batch-predictions", json=body)
    assert answer.status_code == 202, answer.text
    return answer.json()["job_id"]


def after_first_partition(client: TestClient, job_id: str) -> dict[str, Any]:
    """The job's view once a partition was scored and staged (and most are still to come); it
    may wait in the queue first (a slot is freed once an earlier job's thread has ended)."""
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        assert job["status"] in ("queued", "running"), job
        detail = job["progress_detail"] or {}
        if (detail.get("partitions_done") or 0) >= 1:
            assert detail["partitions_done"] < N_FILES - 4, job  # the test acts mid-job
            return job
        time.sleep(0.05)


def settled(watcher: Any) -> bool:
    """The scheduler holds no task, and no worker still executes one (a task cancelled while it
    runs goes on in its worker thread after the scheduler forgot it)."""
    busy = any(watcher.processing().values())
    held = watcher.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
    executing = watcher.run(lambda dask_worker: dask_worker.state.executing_count)
    return not busy and held == 0 and not any(executing.values())


def queued_partitions(watcher: Any) -> list[int]:
    """Indexes of the batch job's partitions still in the scheduler's queue (the tasks are
    ``bsvm-batch-<hex>-<index>``): handed to no worker yet, so not started."""
    states = watcher.run_on_scheduler(
        lambda dask_scheduler: {str(key): ts.state for key, ts in dask_scheduler.tasks.items()}
    )
    found = (
        re.fullmatch(r"bsvm-batch-[0-9a-f]{32}-(\d+)", key)
        for key, state in states.items()
        if state == "queued"
    )
    return sorted(int(match.group(1)) for match in found if match)


def wait_until(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the cluster did not settle"
        time.sleep(0.1)


def output_files(s3: Any, name: str) -> list[str]:
    """Every object under the job's output prefix (staged ones included)."""
    s3.invalidate_cache()
    return sorted(s3.find(f"{BUCKET}/batch-dask/{name}/out/"))


def test_a_cancel_stops_the_tasks_and_leaves_nothing(
    client: TestClient, watcher: Any, s3: Any
) -> None:
    put_inputs(s3, f"{BUCKET}/batch-dask/cancel/in/")
    wait_until(lambda: settled(watcher))
    job_id = start(client, "cancel")
    after_first_partition(client, job_id)
    assert not settled(watcher)  # the partitions run on the workers
    assert any("/_temporary/" in key for key in output_files(s3, "cancel"))  # staged, not visible
    cancelled = client.delete(f"/jobs/{job_id}")
    assert cancelled.status_code == 200, cancelled.text
    job = wait_for_job(client, job_id)
    assert job["status"] == "cancelled", job
    assert job["progress_detail"]["partitions_done"] < N_FILES
    wait_until(lambda: settled(watcher))  # every partition task is gone, running ones too
    assert output_files(s3, "cancel") == []  # no _SUCCESS, no part file, nothing staged


def test_an_input_deleted_mid_job_fails_naming_it(
    client: TestClient, watcher: Any, s3: Any
) -> None:
    keys = put_inputs(s3, f"{BUCKET}/batch-dask/doomed/in/")
    wait_until(lambda: settled(watcher))
    job_id = start(client, "doomed")
    after_first_partition(client, job_id)
    waiting = queued_partitions(watcher)
    assert waiting, "every partition was handed to a worker already"
    # a file whose task is second in the scheduler's queue, so it has not started yet: the job
    # fails there, without scoring the files after it
    doomed = keys[waiting[min(1, len(waiting) - 1)]]
    s3.rm(doomed)
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed", job
    assert job["progress_detail"]["partitions_done"] < N_FILES - 1  # the ones after it: not run
    detail = job["error"]["details"][0]
    assert detail["field"] == "input.uri", job["error"]
    assert Path(doomed).name in detail["problem"] and "no longer exists" in detail["problem"]
    wait_until(lambda: settled(watcher))
    assert output_files(s3, "doomed") == []  # no _SUCCESS, no part file, nothing staged
