"""The training worker writes the fitted model's artifact itself (a local artifact folder)."""

from __future__ import annotations

import joblib
import numpy as np
import pytest

from service.repository.local_files import ARTIFACT, LocalArtifact
from service.repository.store import new_model_id
from service.training.fitting import fit_and_evaluate
from tests.service.slow_estimator import slow_task
from tests.service.training.test_jobs import make_queue


@pytest.fixture()
def queue(settings):
    jobs = make_queue(settings)
    yield jobs
    jobs.shutdown()


def spy_puts(queue, monkeypatch) -> list[str]:
    """Model ids the server's process puts into the artifact store from now on."""
    puts: list[str] = []
    real = queue.store.artifacts.put

    def put(model_id: str, data: bytes) -> None:
        puts.append(model_id)
        real(model_id, data)

    monkeypatch.setattr(queue.store.artifacts, "put", put)
    return puts


def sync_task(name: str):
    task = slow_task(name=name, seconds=0.0)
    task.meta["background"] = False
    return task


def test_fit_and_evaluate_writes_the_bytes_it_returns(tmp_path):
    slot = LocalArtifact(str(tmp_path), new_model_id())
    result = fit_and_evaluate(slow_task(seconds=0.0), lambda f: None, artifact=slot)
    assert result.artifact_written
    on_disk = (tmp_path / slot.model_id / ARTIFACT).read_bytes()
    assert on_disk == result.artifact
    assert sorted(p.name for p in (tmp_path / slot.model_id).iterdir()) == [ARTIFACT]
    X = slow_task().X
    loaded = joblib.load(tmp_path / slot.model_id / ARTIFACT)
    np.testing.assert_array_equal(loaded.predict(X), result.estimator.predict(X))


def test_the_worker_writes_the_artifact_and_the_server_puts_nothing(queue, monkeypatch):
    puts = spy_puts(queue, monkeypatch)
    record = queue.wait(queue.submit(sync_task("by-worker"))["job_id"])
    assert puts == []
    model_id = record["model_id"]
    assert queue.store.artifacts.exists(model_id)
    queue.store.cache.discard(model_id)  # read back from the file, through its signature check
    assert queue.store.load(model_id).predict(slow_task().X).shape == (6,)


def test_a_worker_that_cannot_write_leaves_the_put_to_the_server(queue, monkeypatch, tmp_path):
    puts = spy_puts(queue, monkeypatch)
    nowhere = str(tmp_path / "missing" / "folder")  # the worker's mkdir fails there
    monkeypatch.setattr(queue, "_artifact_slot", lambda: LocalArtifact(nowhere, new_model_id()))
    record = queue.wait(queue.submit(sync_task("by-server"))["job_id"])
    assert puts == [record["model_id"]]
    queue.store.cache.discard(record["model_id"])
    assert queue.store.load(record["model_id"]).predict(slow_task().X).shape == (6,)


def test_a_failed_fit_leaves_no_artifact_behind(queue, monkeypatch, tmp_path):
    chosen: list[LocalArtifact] = []

    def slot() -> LocalArtifact:
        chosen.append(LocalArtifact(queue.store.artifacts.root, new_model_id()))
        return chosen[-1]

    monkeypatch.setattr(queue, "_artifact_slot", slot)
    task = sync_task("fails")
    task.params["fail"] = True
    with pytest.raises(Exception):  # noqa: B017 - the training's own error
        queue.wait(queue.submit(task)["job_id"])
    assert len(chosen) == 1 and not queue.store.artifacts.exists(chosen[0].model_id)


def test_only_a_synchronous_trainings_job_row_skips_its_commit_flush(queue, monkeypatch):
    seen: list[bool] = []
    real = queue.job_store.add

    def add(*args, **kwargs):
        seen.append(kwargs.get("durable", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(queue.job_store, "add", add)
    queue.wait(queue.submit(sync_task("sync"))["job_id"])
    queue.wait(queue.submit(slow_task(name="background", seconds=0.0))["job_id"])
    assert seen == [False, True]
