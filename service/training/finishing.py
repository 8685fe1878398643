"""How a job ends: its fitted model stored (retried through outages), or the reason it has none.

Storing the fitted model (``JobFinisher.save``): the model id is chosen once, the artifact put is
idempotent, and the model row commits in the transaction that ends the job, so nothing is ever
stored twice. When the artifact store or the database is unreachable (``repository.faults``), a
training acknowledged with 202 keeps its fitted model (in ``job_results``, or in memory while the
database is down), frees its fitting slot and retries with backoff for ``save_retry_s``, then
fails naming the back end; whoever runs the job after a crash stores the kept model instead of
fitting again. A synchronous training retries for ``SYNC_SAVE_RETRY_S`` and then answers 503.
``error_of`` turns a finished job's stored error back into the ``ApiError`` a waiting request
raises.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from service.errors import (
    ApiError,
    DatabaseUnavailable,
    InvalidInput,
    StoreUnavailable,
    TrainingAbandoned,
    TrainingCancelled,
    TrainingFailed,
    TrainingOutOfMemory,
    TrainingTimeout,
    Unavailable,
    detail,
)
from service.repository.faults import DATABASE, STORE, backend_down
from service.repository.jobs import RETRY_AFTER_S, JobLost, JobStore
from service.repository.local_files import LocalArtifact
from service.repository.store import PendingSave
from service.settings import Settings
from service.training.search_request import timeout_detail
from service.training.tasks import TrainTask, build_record
from service.training.worker import Outcome

logger = logging.getLogger("service.training.finishing")

SYNC_SAVE_RETRY_S = 3.0
"""How long a synchronous training retries its save before answering 503 (its client retries)."""
SAVE_BACKOFF_S = (0.5, 30.0)
"""First and longest pause between two attempts of a failed save (doubling in between)."""
UNAVAILABLE = {DATABASE: "DATABASE_UNAVAILABLE", STORE: "STORE_UNAVAILABLE"}


ERRORS: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (
        TrainingTimeout,
        TrainingFailed,
        TrainingCancelled,
        InvalidInput,
        TrainingAbandoned,
        TrainingOutOfMemory,
        DatabaseUnavailable,  # a back end down while the model was saved: 503, Retry-After
        StoreUnavailable,
    )
}


def unavailable(backend: str, message: str) -> ApiError:
    """503 naming the back end that is down (``STORE_UNAVAILABLE``, ``DATABASE_UNAVAILABLE``)."""
    if backend == STORE:
        return StoreUnavailable(message)
    if backend == DATABASE:
        return DatabaseUnavailable(message)
    return Unavailable(message, headers={"Retry-After": str(RETRY_AFTER_S)})


def error_of(view: dict[str, Any]) -> ApiError:
    """The ``ApiError`` a finished job's stored error stands for."""
    error = view.get("error") or {}
    if error.get("code") in UNAVAILABLE.values():
        return unavailable(
            STORE if error["code"] == "STORE_UNAVAILABLE" else DATABASE, error["message"]
        )
    cls = ERRORS.get(error.get("code", ""), TrainingFailed)
    exc = cls(error.get("message", "the training ended without a model"))
    exc.details = [detail(d["field"], d["problem"]) for d in error.get("details", [])]
    exc.code = error.get("code", exc.code)
    return exc


@dataclass
class Running:
    """A job this process runs: its cancel switch and latest progress."""

    job_id: str
    cancel: threading.Event
    progress: float = 0.1
    detail: dict[str, Any] | None = None
    """The latest ``ProgressDetail`` (passes, partitions, iterations), when the work gives one."""
    lost: bool = False
    saving: bool = False
    """The fit is over and its model is being stored: the job no longer takes a fitting slot."""
    record: dict[str, Any] | None = None
    """The stored model's record, once its row and the job's end have committed."""
    artifact: LocalArtifact | None = None
    """Where the worker writes the fitted model (a local artifact folder), under the model id
    chosen for it before the fit."""


class JobFinisher:
    """Ends the jobs one process runs: stores their models or records why there is none."""

    def __init__(
        self,
        settings: Settings,
        store: Any,
        job_store: JobStore,
        owner: str,
        wake: threading.Event,
        stop: threading.Event,
    ) -> None:
        self.settings = settings
        self.store = store
        self.job_store = job_store
        self.owner = owner
        self.wake = wake
        """Set when a save's first attempt fails (its fitting slot is free meanwhile: the
        dispatcher claims the next job); a save that succeeds at once frees the slot when its
        job ends (``JobQueue._forget`` wakes the dispatcher), so the dispatcher's statements do
        not run beside the save's."""
        self.stop = stop
        """Set when the process shuts down (``end`` stops retrying)."""

    def save(
        self, running: Running, task: TrainTask, outcome: Outcome, kept: PendingSave | None
    ) -> str:
        """Store the fitted model; on a transient fault keep it and retry with backoff. How the
        job ended (``succeeded``, ``failed``, ``cancelled``), for the metrics.

        The model id is chosen once (``prepare``, or the one kept in the job's row), the artifact
        put is idempotent, and the model row commits in one transaction with the job's end, so a
        retry, a crash or a takeover never stores a model twice. A background training (it was
        acknowledged with 202) retries for ``save_retry_s``, first keeping the fitted model in
        its job's row (so a replica that takes the job over stores it without fitting again); a
        synchronous one for ``SYNC_SAVE_RETRY_S``, then 503 (its client is there to retry).
        """
        job_id = running.job_id
        running.saving = True  # the fitting slot is free: the dispatcher is woken once the job
        if kept is None:  # ends, or when a first attempt fails (not now: it would run beside)
            result = outcome.result
            assert result is not None
            taken = result.artifact is not None and running.artifact is not None
            elsewhere = None
            if taken:  # the worker's bytes, under the id it was given; on disk, or being written
                elsewhere = outcome.written or (lambda: result.artifact_written)
            try:
                pending = self.store.prepare(
                    result.estimator,
                    build_record(task, result),
                    model_id=running.artifact.model_id if taken else None,
                    data=result.artifact if taken else None,
                    elsewhere=elsewhere,
                )
            except Exception:
                logger.exception("the model of job %s could not be serialised", job_id)
                self.end(running, "failed", TrainingFailed("the fitted model could not be saved"))
                return "failed"
        else:
            pending = kept
        background = bool(task.meta.get("background", True))
        budget = self.settings.save_retry_s if background else SYNC_SAVE_RETRY_S
        deadline = time.monotonic() + min(budget, self.settings.save_retry_s)
        pause, in_row = SAVE_BACKOFF_S[0], kept is not None
        failures = 0
        while True:
            try:
                running.record = self.store.save_prepared(
                    pending,
                    replace_schema=bool(task.meta.get("replace_schema")),
                    then=lambda conn, record: self.job_store.finish_saved(
                        conn, job_id, self.owner, record["model_id"], running.detail
                    ),
                )
            except JobLost:  # taken over or cancelled meanwhile; the row was rolled back
                return self.after_lost(running, pending, in_row)
            except Exception as exc:
                backend = backend_down(exc)
                if backend is None and isinstance(exc, ApiError):  # e.g. the name took another
                    self.end(running, "failed", exc)  # type meanwhile
                    return "failed"
                if backend is None:  # save_prepared removed what it wrote
                    logger.exception("storing the model of job %s failed", job_id)
                    self.end(
                        running,
                        "failed",
                        TrainingFailed("the model was fitted but could not be stored"),
                    )
                    return "failed"
                failures += 1
                if failures == 1:  # a queued job may take the fitting slot while this retries
                    self.wake.set()
                logger.warning(
                    "job %s: the %s is unreachable while storing model %s (attempt %d): %s",
                    job_id,
                    backend,
                    pending.model_id,
                    failures,
                    exc,
                    extra={"fields": {"job_id": job_id, "model_id": pending.model_id}},
                )
                if self.ended_with(job_id, pending.model_id):
                    return "succeeded"  # the commit went through; only its answer was lost
                if background and not in_row:
                    in_row = self.keep(running, pending)
                if running.cancel.is_set():
                    return self.after_lost(running, pending, in_row)
                if time.monotonic() >= deadline:
                    self.give_up(running, pending, backend, background)
                    return "failed"
                running.cancel.wait(min(pause, max(deadline - time.monotonic(), 0.0)))
                pause = min(pause * 2, SAVE_BACKOFF_S[1])
            else:
                return "succeeded"

    def keep(self, running: Running, pending: PendingSave) -> bool:
        """Keep the fitted model in the job's row; False when the database cannot take it now."""
        try:
            return self.job_store.keep_result(
                running.job_id, self.owner, pending.model_id, pending.record, pending.data
            )
        except Exception as exc:
            logger.warning("job %s: model kept in memory only (%s)", running.job_id, exc)
            return False

    def ended_with(self, job_id: str, model_id: str) -> bool:
        """True when the job already ended ``succeeded`` with ``model_id`` (False if unknown)."""
        try:
            state = self.job_store.ended_with(job_id)
        except Exception:
            return False
        return state == ("succeeded", model_id)

    def after_lost(self, running: Running, pending: PendingSave, in_row: bool) -> str:
        """The job stopped being ours while storing, or was cancelled: record the cancel, and
        remove the artifact unless the job ended with this very model or another process took
        the job over with the model kept in its row (it stores it under the same id)."""
        job_id = running.job_id
        if self.ended_with(job_id, pending.model_id):
            return "succeeded"
        if not running.lost:  # a cancel request, not a takeover
            self.store.discard_artifact(pending.model_id)
            self.end(running, "cancelled", TrainingCancelled("the training was cancelled"))
            return "cancelled"
        logger.warning("job %s was taken over while storing its model; left to its owner", job_id)
        if not in_row:  # the new owner fits again and stores under an id of its own
            self.store.discard_artifact(pending.model_id)
        return "cancelled"

    def give_up(
        self, running: Running, pending: PendingSave, backend: str, background: bool
    ) -> None:
        """The back end stayed down past the retry budget: fail the job with the reason."""
        if background:
            message = (
                f"the model was fitted but the {backend} stayed unreachable for "
                f"{self.settings.save_retry_s:g} s (BSVM_SAVE_RETRY_S); send the training again"
            )
        else:
            message = (
                f"the model was fitted but the {backend} is unreachable, so it was not stored; "
                "send the training again later"
            )
        logger.error("job %s: %s", running.job_id, message)
        try:  # a commit whose answer was lost has a row: then the artifact is the model's
            rowless = not self.store.has_row(pending.model_id)
        except Exception:
            rowless = False  # the sweep removes it once it has no row
        if rowless:
            self.store.discard_artifact(pending.model_id)
        self.end(running, "failed", unavailable(backend, message))

    def end(self, running: Running, status: str, error: ApiError) -> None:
        """End the job as ``status``, retrying the write while the database is down (until the
        job is taken over, which the heartbeat notices once the database answers again)."""
        pause = SAVE_BACKOFF_S[0]
        while not running.lost and not self.stop.is_set():
            try:
                self.job_store.finish_if(
                    running.job_id, "running", status, error, detail=running.detail
                )
                return
            except Exception as exc:
                if backend_down(exc) is None:
                    raise
                logger.warning("job %s: its end cannot be written yet: %s", running.job_id, exc)
            self.stop.wait(pause)
            pause = min(pause * 2, SAVE_BACKOFF_S[1])

    def conclude(
        self,
        job_id: str,
        task: TrainTask,
        outcome: Outcome,
        last: dict[str, Any] | None = None,
    ) -> None:
        """End a job whose fit did not produce a model (keeping its ``last`` progress detail)."""
        error: ApiError
        if outcome.status == "cancelled":
            error = TrainingCancelled("the training was cancelled")
            self.job_store.finish_if(job_id, "running", "cancelled", error, detail=last)
            return
        if outcome.status == "timeout":
            error = TrainingTimeout(
                outcome.message,
                [timeout_detail(task.search, task.cv)],
            )
        elif outcome.status == "memory":
            error = TrainingOutOfMemory(
                outcome.message,
                [detail("X", "send fewer rows or features, or ask for a smaller model")],
            )
        elif outcome.status == "data":
            error = TrainingFailed(outcome.message, [detail("data.uri", outcome.message)])
        elif outcome.status == "invalid":
            error = InvalidInput(
                f"the estimator rejected the data or parameters: {outcome.message}"
            )
        else:
            logger.error("training job %s failed: %s", job_id, outcome.message)
            error = TrainingFailed("the training failed; the server log has the details")
        self.job_store.finish_if(job_id, "running", "failed", error, detail=last)
