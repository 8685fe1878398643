"""No process holds the whole data set (issue #25): trainings by reference on ~450 MB of rows.

* A real server process (uvicorn) trains by reference while its RSS is sampled from
  ``/proc/<pid>/status``: it grows by at most 50 MB, and the training worker that streams the
  partitions peaks far below the data set's size (``training.peak_rss_mb``).
* A Dask ``LocalCluster`` whose workers each have a ``memory_limit`` below the data set's size,
  with Dask's own spill, pause and terminate thresholds, fits the same model: the partitions are
  streamed per pass on the workers (``service.data.partitions.keeps``).

Both models equal the in-memory fit on the same rows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import distributed
import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from bsvm_core import LDA
from service.api.app import create_app
from service.settings import Settings
from tests.service.conftest import wait_for_job
from tests.service.live_server import live_server

pytestmark = pytest.mark.slow

N_FILES, ROWS_PER_FILE, ROW_GROUP, N_FEATURES = 7, 400_000, 100_000, 20
N_ROWS = N_FILES * ROWS_PER_FILE
DATA_BYTES = N_ROWS * (N_FEATURES + 1) * 8
"""The data set as the float64 blocks a fit reads: 2.8 M rows × (20 features + label) ≈ 470 MB
(the Parquet files hold float64 too: about as much on disk)."""
MEMORY_LIMIT = 400 * 2**20
"""Each Dask worker's limit: below the data set's size, and about 1.6 times what a worker process
uses once it has read a partition (numpy, pyarrow, the service's loaders: ~250 MB), so Dask's
default thresholds (spill at 70 %, pause at 80 %, terminate at 95 %) act on real numbers."""
RSS_GROWTH_MB = 50
FEATURES = [f"f{j}" for j in range(N_FEATURES)]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """``N_FILES`` Parquet shards of row groups of ``ROW_GROUP`` rows; the rows, for the
    in-memory fit."""
    root = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = (X @ np.linspace(-1, 1, N_FEATURES) + rng.standard_normal(N_ROWS) > 0).astype(np.int64)
    (root / "big").mkdir()
    for i in range(N_FILES):
        rows = slice(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE)
        table = pa.table({**{f: X[rows, j] for j, f in enumerate(FEATURES)}, "label": y[rows]})
        pq.write_table(table, root / "big" / f"part-{i}.parquet", row_group_size=ROW_GROUP)
    small = pa.table({**{f: X[:1000, j] for j, f in enumerate(FEATURES)}, "label": y[:1000]})
    (root / "small").mkdir()
    pq.write_table(small, root / "small" / "part-0.parquet")
    return root, X, y


@pytest.fixture(scope="module")
def in_memory(big: tuple[Path, np.ndarray, np.ndarray]) -> LDA:
    _, X, y = big
    return LDA().fit(X, y)


def body(uri: str, name: str) -> dict[str, Any]:
    return {
        "model_type": "lda",
        "name": name,
        "data": {"uri": uri, "format": "parquet", "target": "label"},
    }


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def server_pid(port: int) -> int:
    """The pid of the process listening on loopback ``port`` (from /proc/net/tcp)."""
    wanted = f"0100007F:{port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted and fields[3] == "0A":  # LISTEN
            inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                link = fd.readlink().as_posix()
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"nobody listens on port {port}")


class Sampler:
    """The highest VmRSS of ``pid`` seen while it runs, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_job(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{url}/train", json=payload, timeout=60)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    while True:
        job = httpx.get(f"{url}/jobs/{job_id}", timeout=30).json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.1)


def decisions(model: Any, X: np.ndarray) -> np.ndarray:
    return np.asarray(model.decision_function(X))


def test_the_server_and_its_worker_never_hold_the_data_set(
    big: tuple[Path, np.ndarray, np.ndarray], in_memory: LDA, tmp_path: Path
) -> None:
    root, X, _ = big
    settings = {"data_urls": f"file://{root}/", "job_lease_s": "2", "log_level": "warning"}
    with live_server(tmp_path / "models", tmp_path, **settings) as url:
        pid = server_pid(int(url.rsplit(":", 1)[1]))
        # a first small training by reference loads what every such job needs (pyarrow, fsspec)
        warm = run_job(url, body(f"file://{root}/small/", "warm-up"))
        assert warm["status"] == "succeeded", warm
        before = rss_mb(pid)
        with Sampler(pid) as sampler:
            job = run_job(url, body(f"file://{root}/big/", "big-local"))
        assert job["status"] == "succeeded", job
        record = httpx.get(f"{url}/models/{job['model_id']}").json()
        rows = X[:: N_ROWS // 500][:500]
        answer = httpx.post(
            f"{url}/predict",
            json={"model": "big-local", "X": rows.tolist(), "outputs": ["decision_function"]},
        )
        assert answer.status_code == 200, answer.text
        warm_record = httpx.get(f"{url}/models/{warm['model_id']}").json()
    growth = sampler.peak - before
    data_mb = DATA_BYTES / 2**20
    # the worker of the 1,000-row training peaked at what the worker itself needs
    worker_peak, worker_base = (r["training"]["peak_rss_mb"] for r in (record, warm_record))
    print(f"server RSS {before:.0f} MB, peak {sampler.peak:.0f} MB (+{growth:.1f} MB); data set "
          f"{data_mb:.0f} MB; worker peak {worker_peak} MB (small job: {worker_base} MB)")  # fmt: skip
    assert growth <= RSS_GROWTH_MB
    assert record["data"]["rows"] == N_ROWS and record["training"]["partitions"] == 28
    assert worker_peak - worker_base < data_mb / 2  # holding the rows would add all of data_mb
    np.testing.assert_allclose(
        answer.json()["decision_function"], decisions(in_memory, rows), rtol=1e-6, atol=1e-8
    )


@pytest.fixture(scope="module")
def small_cluster() -> Iterator[Any]:
    """Two worker processes of ``MEMORY_LIMIT`` each, Dask's default memory thresholds."""
    with dask.config.set({"distributed.worker.daemon": False}):  # the fit starts a process
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit=MEMORY_LIMIT,
            dashboard_address=None,
        )
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_cluster_of_workers_smaller_than_the_data_set_fits_it(
    big: tuple[Path, np.ndarray, np.ndarray], in_memory: LDA, small_cluster: Any, tmp_path: Path
) -> None:
    root, X, _ = big
    assert MEMORY_LIMIT < DATA_BYTES
    thresholds = dask.config.get("distributed.worker.memory")
    assert thresholds["spill"] and thresholds["pause"] and thresholds["terminate"]
    settings = Settings(
        data_dir=tmp_path,
        log_level="warning",
        data_urls=f"file://{root}/",
        dask_scheduler=small_cluster.scheduler_address,
    )
    with distributed.Client(small_cluster.scheduler_address, set_as_default=False) as watcher:
        workers_before = set(watcher.scheduler_info()["workers"])
        with TestClient(create_app(settings)) as client:
            answer = client.post("/train", json=body(f"file://{root}/big/", "big-dask"))
            assert answer.status_code == 202, answer.text
            job = wait_for_job(client, answer.json()["job_id"], timeout_s=600)
            assert job["status"] == "succeeded", job
            record = client.get(f"/models/{job['model_id']}").json()
            rows = X[:: N_ROWS // 500][:500]
            answer = client.post(
                "/predict",
                json={"model": "big-dask", "X": rows.tolist(), "outputs": ["decision_function"]},
            )
        workers_after = set(watcher.scheduler_info()["workers"])
    assert workers_after == workers_before  # no worker was paused to death or restarted
    assert record["data"]["rows"] == N_ROWS and record["training"]["passes"] == 3
    np.testing.assert_allclose(
        answer.json()["decision_function"], decisions(in_memory, rows), rtol=1e-6, atol=1e-8
    )
