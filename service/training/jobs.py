"""The job table: every training is a job, run by a thread that supervises one worker process.

Statuses: ``queued`` → ``running`` → ``succeeded`` | ``failed`` | ``cancelled``. At most
``train_concurrency`` jobs are queued or running at once; one more is refused with 429 and
``Retry-After``. Finished jobs are forgotten ``job_ttl_s`` seconds after they end. A job's error
carries the code and message a synchronous ``POST /train`` answers with.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from service.errors import (
    ApiError,
    Busy,
    InvalidInput,
    NotFound,
    TrainingCancelled,
    TrainingFailed,
    TrainingTimeout,
    detail,
)
from service.repository.store import ModelStore
from service.settings import Settings
from service.training.tasks import build_record
from service.training.worker import Outcome, TrainTask, run_in_process, warm_up

logger = logging.getLogger("service.training.jobs")

JOB_ID_PATTERN = r"^j_[0-9a-f]{32}$"
_JOB_ID_RE = re.compile(JOB_ID_PATTERN)
ACTIVE = ("queued", "running")
RETRY_AFTER_S = 5


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class Job:
    """One training and its state; ``view()`` is what ``GET /jobs/{id}`` shows."""

    job_id: str
    model_type: str
    name: str
    status: str = "queued"
    progress: float = 0.0
    model_id: str | None = None
    error: ApiError | None = None
    record: dict[str, Any] | None = None
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    ended: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def view(self) -> dict[str, Any]:
        """The public fields of the job."""
        error = None
        if self.error is not None:
            error = {
                "code": self.error.code,
                "message": self.error.message,
                "details": [d.model_dump() for d in self.error.details],
            }
        return {
            "job_id": self.job_id,
            "status": self.status,
            "progress": round(self.progress, 4),
            "model_type": self.model_type,
            "name": self.name,
            "model_id": self.model_id,
            "error": error,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


class JobManager:
    """Starts, tracks, cancels and forgets trainings.

    Parameters
    ----------
    settings : Settings
        Uses ``train_concurrency``, ``train_timeout_s`` and ``job_ttl_s``.
    store : ModelStore
        Where a successful fit is saved.
    metrics : object, optional
        Anything with ``record_training(model_type, outcome, seconds)``.
    """

    def __init__(self, settings: Settings, store: ModelStore, metrics: Any = None) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self._jobs: dict[str, Job] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        threading.Thread(target=warm_up, name="train-warm-up", daemon=True).start()

    # -- table ---------------------------------------------------------------------------------
    def _purge(self) -> None:
        horizon = time.monotonic() - self.settings.job_ttl_s
        for job_id in [j for j, job in self._jobs.items() if job.ended and job.ended < horizon]:
            del self._jobs[job_id]
            self._threads.pop(job_id, None)

    def get(self, job_id: str) -> Job:
        """The job ``job_id`` (404 when unknown or expired)."""
        with self._lock:
            self._purge()
            job = self._jobs.get(job_id) if _JOB_ID_RE.fullmatch(job_id) else None
        if job is None:
            raise NotFound(f"no job with id {job_id!r}")
        return job

    # -- lifecycle -----------------------------------------------------------------------------
    def submit(self, task: TrainTask) -> Job:
        """Start ``task`` as a new job, or raise 429 when ``train_concurrency`` are active."""
        with self._lock:
            self._purge()
            active = sum(job.status in ACTIVE for job in self._jobs.values())
            if active >= self.settings.train_concurrency:
                raise Busy(
                    f"{active} trainings are running (BSVM_TRAIN_CONCURRENCY); retry later",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                )
            job = Job(f"j_{uuid.uuid4().hex}", task.model_type, task.meta["name"])
            self._jobs[job.job_id] = job
            thread = threading.Thread(
                target=self._run, args=(job, task), name=f"train-{job.job_id}", daemon=True
            )
            self._threads[job.job_id] = thread
        thread.start()
        return job

    def _progress(self, job: Job, fraction: float) -> None:
        if job.status == "running":
            job.progress = max(job.progress, min(fraction, 0.99))

    def _run(self, job: Job, task: TrainTask) -> None:
        started = time.monotonic()
        job.status, job.started_at = "running", _now()
        try:
            outcome = run_in_process(
                task,
                timeout_s=self.settings.train_timeout_s,
                cancelled=job.cancel,
                on_progress=lambda f: self._progress(job, f),
            )
        except Exception:
            logger.exception("training job %s could not run its worker", job.job_id)
            outcome = Outcome("failed", message="the worker process could not be started")
        status, error = "failed", None
        if outcome.status == "succeeded" and outcome.result is not None:
            try:
                record = self.store.save(
                    outcome.result["estimator"], build_record(task, outcome.result)
                )
            except Exception:
                logger.exception("storing the model of job %s failed", job.job_id)
                error = TrainingFailed("the model was fitted but could not be stored")
            else:
                status, job.record, job.model_id, job.progress = (
                    "succeeded",
                    record,
                    record["model_id"],
                    1.0,
                )
        elif outcome.status == "cancelled":
            status, error = "cancelled", TrainingCancelled("the training was cancelled")
        elif outcome.status == "timeout":
            error = TrainingTimeout(
                outcome.message,
                [detail("X", "fit took too long: send fewer rows or lower max_iter")],
            )
        elif outcome.status == "invalid":
            error = InvalidInput(
                f"the estimator rejected the data or parameters: {outcome.message}"
            )
        else:
            logger.error("training job %s failed: %s", job.job_id, outcome.message)
            error = TrainingFailed("the training failed; the server log has the details")
        job.error, job.finished_at, job.ended = error, _now(), time.monotonic()
        job.status = status
        job.done.set()
        if self.metrics is not None:
            outcome_label = outcome.status if outcome.status != "invalid" else "failed"
            self.metrics.record_training(task.model_type, outcome_label, time.monotonic() - started)

    def wait(self, job: Job) -> dict[str, Any]:
        """Block until ``job`` ends; return its record or raise the error it ended with."""
        job.done.wait()
        if job.record is not None:
            return job.record
        raise job.error or TrainingFailed("the training ended without a model")

    def cancel(self, job_id: str) -> Job:
        """Cancel a queued or running job (its worker is killed); finished jobs are unchanged."""
        job = self.get(job_id)
        if job.status in ACTIVE:
            job.cancel.set()
            job.done.wait(timeout=15)
        return job

    def shutdown(self) -> None:
        """Cancel every active job and wait for their supervisors to finish."""
        with self._lock:
            jobs = [job for job in self._jobs.values() if job.status in ACTIVE]
            threads = list(self._threads.values())
        for job in jobs:
            job.cancel.set()
        for thread in threads:
            thread.join(timeout=15)
