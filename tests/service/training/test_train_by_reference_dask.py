"""Training by reference on a Dask LocalCluster: partitions read on the workers, each worker's
memory limit below the data set's size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import distributed
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import wait_for_job

N_ROWS, N_FEATURES, N_FILES = 40_000, 10, 8
MEMORY_LIMIT = 2 * 2**20
"""Below the data set's size (40,000 × 10 float64 = 3.2 MB): no worker could hold it all. The
pause and terminate thresholds are off (a worker process alone is above 2 MiB), so the limit acts
as the managed-memory budget: what a worker keeps beyond it is spilled to disk."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dask-data")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    y = np.where(X @ np.linspace(-1, 1, N_FEATURES) + rng.normal(size=N_ROWS) > 0, 1, 0)
    for i, rows in enumerate(np.array_split(np.arange(N_ROWS), N_FILES)):
        table = pa.table({**{f"f{j}": X[rows, j] for j in range(N_FEATURES)}, "label": y[rows]})
        pq.write_table(table, root / f"part-{i}.parquet")
    assert X.nbytes > MEMORY_LIMIT
    return root


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    overrides = {
        "distributed.worker.daemon": False,
        "distributed.worker.memory.pause": False,
        "distributed.worker.memory.terminate": False,
    }
    with dask.config.set(overrides):
        local = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=MEMORY_LIMIT,
            dashboard_address=None,
        )
        yield local
        local.close()


def test_lda_fits_on_the_workers(cluster: Any, data_dir: Path, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        log_level="warning",
        data_urls=f"file://{data_dir}/",
        dask_scheduler=cluster.scheduler_address,
    )
    body = {
        "model_type": "lda",
        "name": "dask-ref",
        "data": {"uri": f"file://{data_dir}/", "format": "parquet", "target": "label"},
        "evaluation": {"test_fraction": 0.25, "random_state": 1},
    }
    with TestClient(create_app(settings)) as client:
        answer = client.post("/train", json=body)
        assert answer.status_code == 202, answer.text
        job = wait_for_job(client, answer.json()["job_id"], timeout_s=180)
        assert job["status"] == "succeeded", job
        record = client.get(f"/models/{job['model_id']}").json()
    assert record["training"]["partitions"] == 6  # two of eight files held out
    assert record["metrics"]["heldout"]["n_samples"] == N_ROWS // 4
    assert record["metrics"]["train"]["accuracy"] > 0.8
    assert record["data"]["rows"] == N_ROWS
