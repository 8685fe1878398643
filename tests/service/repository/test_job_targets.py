"""One queued or running job per output prefix (``jobs.target``), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from service.errors import Conflict
from service.repository.database import Database
from service.repository.jobs import JobStore, new_job_id
from service.repository.tables import jobs

TARGET = "file:///data/out/run-1/"


@pytest.fixture()
def job_store(database_url: str) -> JobStore:
    db = Database(database_url)
    db.migrate()
    yield JobStore(db)
    db.dispose()


def _add(store: JobStore, target: str | None, **kwargs) -> str:
    job_id = new_job_id()
    store.add(job_id, "lda", "demo", b"{}", 100, kind="batch_predict", target=target, **kwargs)
    return job_id


def test_a_second_job_on_an_active_target_is_a_409_naming_the_holder(job_store):
    first = _add(job_store, TARGET)
    with pytest.raises(Conflict) as refused:
        _add(job_store, TARGET)
    (detail,) = refused.value.details
    assert detail.field == "output.uri"
    assert first in detail.problem and TARGET in detail.problem
    assert job_store.holder_of(TARGET) == first
    _add(job_store, "file:///data/out/run-2/")  # another prefix is free
    _add(job_store, None)  # jobs that write nowhere never clash
    _add(job_store, None)


def test_a_running_holder_keeps_it_and_an_ended_one_frees_it(job_store):
    running = _add(job_store, TARGET, claim=("elsewhere:1:x", 3600.0))
    with pytest.raises(Conflict):
        _add(job_store, TARGET)
    assert job_store.finish_if(running, "running", "failed")
    again = _add(job_store, TARGET)
    assert job_store.holder_of(TARGET) == again


def test_the_index_refuses_a_second_active_row_without_the_check(job_store):
    """What settles two processes that both passed the check: the partial unique index."""
    _add(job_store, TARGET)
    row = {
        "job_id": new_job_id(),
        "status": "queued",
        "model_type": "lda",
        "name": "demo",
        "progress": 0.0,
        "cancel_requested": False,
        "attempts": 0,
        "created_at": "2026-11-27T00:00:00Z",
        "kind": "batch_predict",
        "target": TARGET,
    }
    with pytest.raises(IntegrityError), job_store.db.write() as conn:
        conn.execute(insert(jobs).values(**row))
    with job_store.db.write() as conn:  # an ended job on the same target is allowed
        conn.execute(insert(jobs).values(**{**row, "job_id": new_job_id(), "status": "failed"}))
