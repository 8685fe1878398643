"""Training jobs: worker processes, progress, cancel, timeout, concurrency, TTL."""

from __future__ import annotations

import os
import time

import pytest
from sklearn.datasets import load_breast_cancer

from service.repository.store import ModelStore
from service.training.jobs import JobManager
from tests.service.conftest import train_body, wait_for_job
from tests.service.slow_estimator import slow_task


def process_gone(pid: int, timeout_s: float = 30.0) -> bool:
    """True once no process ``pid`` exists (a killed worker is reaped by its parent)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def read_pid(path, timeout_s: float = 60.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError("the worker never started")


@pytest.fixture()
def manager(settings):
    jobs = JobManager(settings, ModelStore(settings))
    yield jobs
    jobs.shutdown()


def test_fit_runs_in_another_process_and_is_stored(manager, tmp_path):
    pid_file = tmp_path / "pid"
    job = manager.submit(slow_task(pid_file=str(pid_file)))
    record = manager.wait(job)
    assert int(pid_file.read_text()) != os.getpid()
    assert job.status == "succeeded" and job.progress == 1.0 and job.model_id == record["model_id"]
    assert manager.store.get_record(job.model_id)["model_type"] == "slow"


def test_progress_is_reported_while_running(manager):
    job = manager.submit(slow_task(seconds=3.0))
    seen = []
    while not job.done.is_set():
        seen.append(job.progress)
        time.sleep(0.02)
    assert any(0.15 < p < 0.9 for p in seen), seen
    assert seen == sorted(seen) and job.progress == 1.0


def test_cancel_kills_the_worker(manager, tmp_path):
    pid_file = tmp_path / "pid"
    job = manager.submit(slow_task(seconds=120.0, pid_file=str(pid_file)))
    pid = read_pid(pid_file)
    manager.cancel(job.job_id)
    assert job.status == "cancelled" and job.model_id is None
    assert process_gone(pid)
    assert manager.store.list_records() == ([], 0)


def test_timeout_kills_the_worker(settings, tmp_path):
    settings = settings.model_copy(update={"train_timeout_s": 1.0})
    manager = JobManager(settings, ModelStore(settings))
    pid_file = tmp_path / "pid"
    job = manager.submit(slow_task(seconds=120.0, pid_file=str(pid_file)))
    pid = read_pid(pid_file)
    job.done.wait(timeout=120)
    assert job.status == "failed" and job.error.code == "TRAINING_TIMEOUT"
    assert job.error.status_code == 422
    assert process_gone(pid)
    manager.shutdown()


def test_a_failed_fit_never_loses_an_existing_model(manager):
    kept = manager.wait(manager.submit(slow_task(name="m")))
    job = manager.submit(slow_task(name="m", fail=True))
    job.done.wait(timeout=120)
    assert job.status == "failed" and job.error.code == "INVALID_INPUT"
    assert "asked to fail" in job.error.message
    items, total = manager.store.list_records(name="m")
    assert total == 1 and items[0]["model_id"] == kept["model_id"]
    assert manager.store.load(kept["model_id"]).predict([[0.0, 0.0]]).tolist() == [0]


def test_concurrency_limit_gives_429_with_retry_after(make_client, iris):
    client = make_client(train_concurrency=1)
    jobs = client.app.state.jobs
    job = jobs.submit(slow_task(seconds=120.0))
    X, y = iris
    r = client.post("/train", json=train_body(X, y))
    assert r.status_code == 429 and r.json()["code"] == "BUSY"
    assert int(r.headers["retry-after"]) > 0
    cancelled = client.delete(f"/jobs/{job.job_id}").json()
    assert cancelled["status"] == "cancelled"
    assert client.post("/train", json=train_body(X, y)).status_code == 201


def test_job_routes(client, iris):
    job = client.app.state.jobs.submit(slow_task(seconds=120.0))
    view = client.get(f"/jobs/{job.job_id}").json()
    assert view["status"] in ("queued", "running") and view["model_type"] == "slow"
    assert client.delete(f"/jobs/{job.job_id}").json()["status"] == "cancelled"
    assert client.get(f"/jobs/{job.job_id}").json()["status"] == "cancelled"
    X, y = iris
    done = client.post("/train", json=train_body(X, y, background=True)).json()
    finished = wait_for_job(client, done["job_id"])
    assert client.delete(f"/jobs/{done['job_id']}").json() == finished
    assert client.get("/jobs/j_" + "0" * 32).status_code == 404
    assert client.get("/jobs/../etc").status_code in (404, 422)
    assert client.get("/jobs/" + "j" * 100).status_code == 422


def test_failed_background_job_reports_its_error(client):
    job = client.app.state.jobs.submit(slow_task(fail=True))
    view = wait_for_job(client, job.job_id)
    assert view["status"] == "failed" and view["error"]["code"] == "INVALID_INPUT"
    assert view["model_id"] is None


def test_finished_jobs_expire(make_client):
    client = make_client(job_ttl_s=0.5)
    job = client.app.state.jobs.submit(slow_task())
    assert wait_for_job(client, job.job_id)["status"] == "succeeded"
    time.sleep(0.6)
    assert client.get(f"/jobs/{job.job_id}").status_code == 404


def test_mcmc_progress_is_reported_and_cancel_stops_it_mid_run(client):
    X, y = load_breast_cancer(return_X_y=True)
    params = {"n_draws": 100_000, "burn_in": 100, "n_chains": 1, "random_state": 0}
    body = {"model_type": "mcmc_svm", "X": X[:, :3].tolist(), "y": y.tolist(), "params": params}
    r = client.post("/train", json={**body, "background": True})
    assert r.status_code == 202, r.json()
    job_id = r.json()["job_id"]
    deadline = time.monotonic() + 120
    progress = 0.0
    while progress <= 0.16 and time.monotonic() < deadline:
        view = client.get(f"/jobs/{job_id}").json()
        assert view["status"] == "running", view
        progress = view["progress"]
        time.sleep(0.05)
    assert 0.16 < progress < 0.85
    cancelled = client.delete(f"/jobs/{job_id}").json()
    assert cancelled["status"] == "cancelled" and cancelled["model_id"] is None
    assert client.get("/models").json()["total"] == 0
