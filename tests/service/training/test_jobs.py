"""Training jobs in the database: worker processes, progress, cancel, timeout, queue, TTL."""

from __future__ import annotations

import os
import time

import pytest
from sklearn.datasets import load_breast_cancer

from service.model_types import model_types
from service.repository.opening import open_store
from service.training.executors import LocalExecutor
from service.training.queue import JobQueue
from tests.service.conftest import train_body, wait_for_job
from tests.service.slow_estimator import SLOW_SPEC, slow_task


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


def make_queue(settings, start: bool = True) -> JobQueue:
    store = open_store(settings)
    types = {**model_types(), "slow": SLOW_SPEC}
    queue = JobQueue(settings, store.db, store, LocalExecutor(), types)
    return queue.start() if start else queue


def wait_done(queue: JobQueue, job_id: str, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = queue.get(job_id)
        if view["status"] not in ("queued", "running"):
            return view
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not end")


@pytest.fixture()
def manager(settings):
    jobs = make_queue(settings)
    yield jobs
    jobs.shutdown()


def test_fit_runs_in_another_process_and_is_stored(manager, tmp_path):
    pid_file = tmp_path / "pid"
    job = manager.submit(slow_task(pid_file=str(pid_file)))
    assert job["status"] in ("queued", "running")  # a free slot may claim it at once
    record = manager.wait(job["job_id"])
    assert int(pid_file.read_text()) != os.getpid()
    view = manager.get(job["job_id"])
    assert view["status"] == "succeeded" and view["progress"] == 1.0
    assert view["model_id"] == record["model_id"]
    assert manager.store.get_record(view["model_id"])["model_type"] == "slow"


def test_progress_is_reported_while_running(manager):
    job_id = manager.submit(slow_task(seconds=3.0))["job_id"]
    seen = []
    while (view := manager.get(job_id))["status"] in ("queued", "running"):
        seen.append(view["progress"])
        time.sleep(0.02)
    assert any(0.15 < p < 0.9 for p in seen), seen
    assert seen == sorted(seen) and manager.get(job_id)["progress"] == 1.0


def test_cancel_kills_the_worker(manager, tmp_path):
    pid_file = tmp_path / "pid"
    job_id = manager.submit(slow_task(seconds=120.0, pid_file=str(pid_file)))["job_id"]
    pid = read_pid(pid_file)
    view = manager.cancel(job_id)
    assert view["status"] == "cancelled" and view["model_id"] is None
    assert view["error"]["code"] == "TRAINING_CANCELLED"
    assert process_gone(pid)
    assert manager.store.list_records() == ([], 0)


def test_timeout_kills_the_worker(settings, tmp_path):
    settings = settings.model_copy()
    manager = make_queue(settings)
    # one fit first, and a warm worker waiting: the 1 s limit below is the fit's, not a cold
    # worker's start (which alone can take longer than 1 s on a loaded or cold machine)
    manager.wait(manager.submit(slow_task(name="warm"))["job_id"])
    assert manager.executor.warm.wait_ready(60.0)
    settings.train_timeout_s = 1.0
    pid_file = tmp_path / "pid"
    job_id = manager.submit(slow_task(seconds=120.0, pid_file=str(pid_file)))["job_id"]
    pid = read_pid(pid_file)
    view = wait_done(manager, job_id)
    assert view["status"] == "failed" and view["error"]["code"] == "TRAINING_TIMEOUT"
    with pytest.raises(Exception) as info:
        manager.wait(job_id)
    assert info.value.status_code == 422
    assert process_gone(pid)
    manager.shutdown()


def test_a_failed_fit_never_loses_an_existing_model(manager):
    kept = manager.wait(manager.submit(slow_task(name="m"))["job_id"])
    job_id = manager.submit(slow_task(name="m", fail=True))["job_id"]
    view = wait_done(manager, job_id)
    assert view["status"] == "failed" and view["error"]["code"] == "INVALID_INPUT"
    assert "asked to fail" in view["error"]["message"]
    items, total = manager.store.list_records(name="m")
    assert total == 1 and items[0]["model_id"] == kept["model_id"]
    assert manager.store.load(kept["model_id"]).predict([[0.0, 0.0]]).tolist() == [0]


def test_jobs_beyond_the_concurrency_wait_in_the_queue_and_run_in_order(settings):
    manager = make_queue(settings.model_copy(update={"train_concurrency": 1}))
    first = manager.submit(slow_task(seconds=1.0))["job_id"]
    later = [manager.submit(slow_task(name=f"q{i}"))["job_id"] for i in range(3)]
    time.sleep(0.3)
    assert manager.get(first)["status"] == "running"
    assert [manager.get(j)["status"] for j in later] == ["queued"] * 3
    views = [wait_done(manager, j) for j in [first, *later]]
    assert [v["status"] for v in views] == ["succeeded"] * 4
    starts = [v["started_at"] for v in views]
    assert starts == sorted(starts)
    manager.shutdown()


def test_a_queued_job_outlives_its_process_and_runs_after_a_restart(settings):
    stopped = make_queue(settings.model_copy(update={"train_concurrency": 1}))
    blocker = stopped.submit(slow_task(seconds=60.0))["job_id"]
    waiting = stopped.submit(slow_task(name="after-restart"))["job_id"]
    deadline = time.monotonic() + 60
    while stopped.get(blocker)["status"] != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    stopped.shutdown()  # a clean stop puts the running job back in the queue too
    assert stopped.get(waiting)["status"] == "queued"
    assert stopped.get(blocker)["status"] == "queued"
    restarted = make_queue(settings)
    assert wait_done(restarted, waiting)["status"] == "succeeded"
    assert restarted.cancel(blocker)["status"] == "cancelled"
    restarted.shutdown()


def test_a_running_job_whose_lease_expired_is_queued_again_once_then_failed(settings):
    from sqlalchemy import update

    from service.repository.tables import jobs

    manager = make_queue(settings)
    job_id = manager.submit(slow_task(name="lost"))["job_id"]
    manager.shutdown()  # nobody runs it; make it look like a dead process holds it
    with manager.db.write() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id == job_id)
            .values(status="running", owner="gone:1:x", lease_expires=time.time() - 1, attempts=1)
        )
    survivor = make_queue(settings)
    assert wait_done(survivor, job_id)["status"] == "succeeded"
    second = survivor.submit(slow_task(name="lost-twice"))["job_id"]
    survivor.shutdown()
    with survivor.db.write() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id == second)
            .values(status="running", owner="gone:1:x", lease_expires=time.time() - 1, attempts=2)
        )
    last = make_queue(settings)
    view = wait_done(last, second)
    assert view["status"] == "failed" and view["error"]["code"] == "TRAINING_ABANDONED"
    assert "stopped 2 times" in view["error"]["message"]
    last.shutdown()


def job_row(queue: JobQueue, job_id: str):
    from sqlalchemy import select

    from service.repository.tables import jobs

    with queue.db.read() as conn:
        return conn.execute(select(jobs).where(jobs.c.job_id == job_id)).first()


def test_a_job_with_a_free_slot_and_none_queued_before_it_is_added_claimed(settings):
    manager = make_queue(settings.model_copy(update={"train_concurrency": 1}))
    first = manager.submit(slow_task(seconds=1.0))["job_id"]
    row = job_row(manager, first)  # claimed in the transaction that added it: never queued
    assert (row.status, row.owner, row.attempts) == ("running", manager.owner, 1)
    assert row.lease_expires > time.time() and row.started_at is not None
    second = manager.submit(slow_task(name="second"))["job_id"]
    assert job_row(manager, second).status == "queued"  # no free slot: queued, as before
    assert wait_done(manager, second)["status"] == "succeeded"
    manager.shutdown()
    manager.executor.close()


def test_a_job_added_behind_queued_ones_leaves_them_first(settings):
    stopped = make_queue(settings.model_copy(update={"train_concurrency": 1}))
    stopped.submit(slow_task(seconds=60.0))
    older = stopped.submit(slow_task(name="older"))["job_id"]
    stopped.shutdown()  # both back in the queue, nobody runs them
    stopped.executor.close()
    manager = make_queue(settings.model_copy(update={"train_concurrency": 1}), start=False)
    newer = manager.submit(slow_task(name="newer"))["job_id"]  # no dispatcher: only submit claims
    assert job_row(manager, newer).status == "queued"  # the oldest queued job took the slot
    assert job_row(manager, older).status == "queued"
    assert len(manager._running) == 1 and newer not in manager._running
    manager.shutdown()
    manager.executor.close()  # its warm workers go now (a queue never started is freed late)


def test_a_synchronous_wait_is_answered_from_the_save_not_the_rows(manager, monkeypatch):
    task = slow_task(name="sync", seconds=0.5)
    task.meta["background"] = False  # a synchronous POST /train
    job_id = manager.submit(task)["job_id"]
    reads = []
    monkeypatch.setattr(manager.store, "get_record", lambda model_id: reads.append(model_id))
    record = manager.wait(job_id)
    assert reads == [] and record["name"] == "sync" and record["aliases"] == []
    assert record == manager.store.registry.get_record(record["model_id"])
    assert manager._answers == {} and job_id not in manager._ended


def test_jobs_are_listed_filtered_and_paged(manager):
    ids = [manager.submit(slow_task(name=n))["job_id"] for n in ("x", "y", "x")]
    for job_id in ids:
        wait_done(manager, job_id)
    items, total = manager.list()
    assert total == 3 and {v["job_id"] for v in items} == set(ids)
    items, total = manager.list(name="x")
    assert total == 2 and all(v["name"] == "x" for v in items)
    assert manager.list(status="running") == ([], 0)
    page, total = manager.list(limit=1, offset=1)
    assert total == 3 and len(page) == 1


def test_a_full_queue_gives_429_with_retry_after(make_client, iris):
    client = make_client(train_concurrency=1, max_queued=1)
    client.app.state.model_types["slow"] = SLOW_SPEC
    jobs = client.app.state.jobs
    running = jobs.submit(slow_task(seconds=120.0))["job_id"]
    while jobs.get(running)["status"] != "running":
        time.sleep(0.02)
    X, y = iris
    queued = client.post("/train", json=train_body(X, y, background=True))
    assert queued.status_code == 202 and queued.json()["status"] == "queued"
    r = client.post("/train", json=train_body(X, y))
    assert r.status_code == 429 and r.json()["code"] == "BUSY"
    assert "BSVM_MAX_QUEUED" in r.json()["error"] and int(r.headers["retry-after"]) > 0
    listed = client.get("/jobs", params={"status": "queued"}).json()
    assert [j["job_id"] for j in listed["items"]] == [queued.json()["job_id"]]
    cancelled = client.delete(f"/jobs/{running}").json()
    assert cancelled["status"] == "cancelled"
    assert wait_for_job(client, queued.json()["job_id"])["status"] == "succeeded"
    assert client.post("/train", json=train_body(X, y)).status_code == 201


def test_job_routes(client, iris):
    client.app.state.model_types["slow"] = SLOW_SPEC
    job_id = client.app.state.jobs.submit(slow_task(seconds=120.0))["job_id"]
    view = client.get(f"/jobs/{job_id}").json()
    assert view["status"] in ("queued", "running") and view["model_type"] == "slow"
    assert view["model_id"] is None and view["version"] is None
    assert client.delete(f"/jobs/{job_id}").json()["status"] == "cancelled"
    assert client.get(f"/jobs/{job_id}").json()["status"] == "cancelled"
    X, y = iris
    done = client.post("/train", json=train_body(X, y, background=True)).json()
    finished = wait_for_job(client, done["job_id"])
    again = wait_for_job(
        client, client.post("/train", json=train_body(X, y, background=True)).json()["job_id"]
    )
    assert (finished["version"], again["version"]) == (1, 2)  # the stored model's, with model_id
    assert client.get(f"/models/{again['model_id']}").json()["version"] == 2
    listed = client.get("/jobs", params={"status": "succeeded"}).json()["items"]
    assert {(j["model_id"], j["version"]) for j in listed} == {
        (finished["model_id"], 1),
        (again["model_id"], 2),
    }
    assert client.delete(f"/jobs/{done['job_id']}").json() == finished
    assert client.get("/jobs/j_" + "0" * 32).status_code == 404
    assert client.get("/jobs/../etc").status_code in (404, 422)
    assert client.get("/jobs/" + "j" * 100).status_code == 422


def test_failed_background_job_reports_its_error(client):
    client.app.state.model_types["slow"] = SLOW_SPEC
    job_id = client.app.state.jobs.submit(slow_task(fail=True))["job_id"]
    view = wait_for_job(client, job_id)
    assert view["status"] == "failed" and view["error"]["code"] == "INVALID_INPUT"
    assert view["model_id"] is None


def test_finished_jobs_expire(make_client):
    client = make_client(job_ttl_s=0.5)
    client.app.state.model_types["slow"] = SLOW_SPEC
    job_id = client.app.state.jobs.submit(slow_task())["job_id"]
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    deadline = time.monotonic() + 10
    while client.get(f"/jobs/{job_id}").status_code != 404 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.get(f"/jobs/{job_id}").status_code == 404


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


KILLED_PARENT = """
import sys, threading
from service.training.worker import run_in_process
from tests.service.slow_estimator import slow_task

if __name__ == "__main__":
    task = slow_task(seconds=120.0, pid_file=sys.argv[1])
    run_in_process(task, timeout_s=600, cancelled=threading.Event())
"""


def test_a_worker_dies_with_the_server_that_started_it(tmp_path):
    """kill -9 of a server must not leave its fits running (and holding memory) as orphans."""
    import subprocess
    import sys

    from tests.service.live_server import ROOT

    script, pid_file = tmp_path / "server.py", tmp_path / "pid"
    script.write_text(KILLED_PARENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, str(script), str(pid_file)], cwd=ROOT, env=env)
    try:
        worker = read_pid(pid_file)
        os.kill(server.pid, 9)
        server.wait(timeout=10)
        assert process_gone(worker), "the worker outlived its killed server"
    finally:
        if server.poll() is None:
            server.kill()
