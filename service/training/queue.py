"""Training jobs: a queue in the database (``repository.jobs``) that any number of processes share.

A job goes ``queued → running → succeeded | failed | cancelled``. ``submit`` stores the task (see
``payload``) and answers 429 only when ``max_queued`` jobs are already waiting. Each process runs one
dispatcher thread that, every ``TICK_S``:

* claims queued jobs while fewer than ``train_concurrency`` run here (a compare-and-set
  ``UPDATE ... WHERE status = 'queued'``, so one job has one owner), and runs each in a thread
  that hands it to the executor (a worker process, or the Dask cluster);
* renews the lease of every job it runs and writes its progress; reads the job's cancel flag, set
  by ``DELETE /jobs/{id}`` on any process, and then kills the work;
* re-queues running jobs whose lease expired (their process died) or fails them with
  ``TRAINING_ABANDONED`` once they have been tried ``MAX_ATTEMPTS`` times; and forgets finished
  jobs after ``job_ttl_s``.

Why re-queue once, then fail: a restart or a replica lost in a deploy should not lose a user's
training, and fits are deterministic (the seed is recorded), so running one again is safe; but a
fit that itself kills its server (memory) would take down one replica after another, so a second
loss fails the job with a clear error instead.

A synchronous ``POST /train`` is a job like any other: the request waits for its row to end.
Leases compare wall clocks of different hosts: keep them in sync (NTP) well within ``job_lease_s``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from service.errors import (
    ApiError,
    DatabaseUnavailable,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    TrainingAbandoned,
    TrainingCancelled,
    TrainingFailed,
    TrainingOutOfMemory,
    TrainingTimeout,
    detail,
)
from service.model_types import ModelTypes
from service.repository.database import Database
from service.repository.jobs import JobStore, new_job_id
from service.settings import Settings
from service.training.executors import Executor
from service.training.payload import decode_task, encode_task
from service.training.tasks import TrainTask, build_record
from service.training.worker import Outcome

logger = logging.getLogger("service.training.queue")

ACTIVE = ("queued", "running")
TICK_S = 0.25
MAX_ATTEMPTS = 2
PURGE_EVERY_S = 10.0
WAIT_POLL_S = 0.05


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


def error_of(view: dict[str, Any]) -> ApiError:
    """The ``ApiError`` a finished job's stored error stands for."""
    error = view.get("error") or {}
    cls = ERRORS.get(error.get("code", ""), TrainingFailed)
    exc = cls(error.get("message", "the training ended without a model"))
    exc.details = [detail(d["field"], d["problem"]) for d in error.get("details", [])]
    exc.code = error.get("code", exc.code)
    return exc


@dataclass
class _Running:
    """A job this process runs: its cancel switch and latest progress."""

    job_id: str
    cancel: threading.Event
    progress: float = 0.1
    lost: bool = False


class JobQueue:
    """Submits, runs, cancels, lists and forgets trainings kept in the database.

    Parameters
    ----------
    settings : Settings
        ``train_concurrency``, ``max_queued``, ``train_timeout_s``, ``job_ttl_s``, ``job_lease_s``.
    db : Database
        Where the jobs live.
    store : object
        ``save(estimator, record) -> record`` stores a fitted model.
    executor : Executor
        Runs one task (worker process or cluster).
    model_types : dict
        Model type → ``ModelSpec``, to rebuild tasks read back from the database.
    metrics : object, optional
        Anything with ``record_training(model_type, outcome, seconds)``.
    """

    def __init__(
        self,
        settings: Settings,
        db: Database,
        store: Any,
        executor: Executor,
        model_types: ModelTypes,
        metrics: Any = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.job_store = JobStore(db)
        self.store = store
        self.executor = executor
        self.model_types = model_types
        self.metrics = metrics
        self.owner = f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._running: dict[str, _Running] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_purge = self._last_reap = self._last_renewal = 0.0
        # leases are renewed, and expired ones looked for, a fifth of a lease apart (at most 1 s)
        self._renew_every = min(settings.job_lease_s / 5, 1.0)
        self._dispatcher = threading.Thread(target=self._loop, name="job-dispatcher", daemon=True)

    def start(self) -> JobQueue:
        """Start the dispatcher thread (and warm the executor up: the first fit starts faster)."""
        warm = getattr(self.executor, "warm_up", None)
        if warm is not None:
            threading.Thread(target=warm, name="executor-warm-up", daemon=True).start()
        self._dispatcher.start()
        return self

    # -- reading -------------------------------------------------------------------------------
    def get(self, job_id: str) -> dict[str, Any]:
        """The view of ``job_id`` (404 when unknown or expired)."""
        view = self.job_store.get(job_id)
        if view is None:
            raise NotFound(f"no job with id {job_id!r}")
        return view

    def list(
        self,
        status: str | None = None,
        name: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of jobs, newest first, filtered by status and name; and the total."""
        return self.job_store.list(status, name, limit, offset)

    # -- submitting, waiting, cancelling -------------------------------------------------------
    def submit(self, task: TrainTask) -> dict[str, Any]:
        """Queue ``task`` as a new job (429 when ``max_queued`` jobs already wait); its view."""
        job_id = new_job_id()
        data = encode_task(task)
        self.job_store.add(
            job_id, task.model_type, task.meta["name"], data, self.settings.max_queued
        )
        self._wake.set()
        return self.get(job_id)

    def wait(self, job_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until ``job_id`` ends; its model record, or raise the error it ended with."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            view = self.get(job_id)
            if view["status"] not in ACTIVE:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TrainingTimeout(f"job {job_id} did not finish in {timeout_s:g} s")
            time.sleep(WAIT_POLL_S)
        if view["status"] == "succeeded" and view["model_id"]:
            return self.store.get_record(view["model_id"])
        raise error_of(view)

    def cancel(self, job_id: str, wait_s: float = 15.0) -> dict[str, Any]:
        """Cancel a queued or running job (its worker is killed); a finished job is unchanged."""
        view = self.get(job_id)
        if view["status"] == "queued":
            self.job_store.finish_if(
                job_id, "queued", "cancelled", TrainingCancelled("the training was cancelled")
            )
        self.job_store.request_cancel(job_id)
        local = self._running.get(job_id)
        if local is not None:
            local.cancel.set()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            view = self.get(job_id)
            if view["status"] not in ACTIVE:
                break
            time.sleep(WAIT_POLL_S)
        return view

    # -- the dispatcher ------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._heartbeat()
                self._reap()
                self._claim()
            except Exception:
                logger.exception("the job dispatcher hit an error; it carries on")
            self._wake.wait(TICK_S)
            self._wake.clear()

    def _claim(self) -> None:
        """Take queued jobs, oldest first, while this process has free slots."""
        while len(self._running) < self.settings.train_concurrency and not self._stop.is_set():
            claimed = self.job_store.claim_oldest(self.owner, self.settings.job_lease_s)
            if claimed is None:
                return
            self._start(*claimed)

    def _start(self, job_id: str, data: bytes | None) -> None:
        try:
            if data is None:
                raise KeyError("payload missing")
            task = decode_task(data, self.model_types)
        except Exception:
            logger.exception("job %s cannot be read back; failed", job_id)
            self.job_store.finish_if(
                job_id,
                "running",
                "failed",
                TrainingFailed("the job's task could not be read (unknown model type?)"),
            )
            return
        running = _Running(job_id, threading.Event())
        thread = threading.Thread(
            target=self._run, args=(running, task), name=f"train-{job_id}", daemon=True
        )
        with self._lock:
            self._running[job_id] = running
            self._threads[job_id] = thread
            thread.start()

    def _heartbeat(self) -> None:
        """Renew this process's leases, write progress, pick up cancel flags set anywhere."""
        with self._lock:
            mine = list(self._running.values())
        if not mine:
            return
        now = time.time()
        if now - self._last_renewal >= self._renew_every:
            self._last_renewal = now
            lease = now + self.settings.job_lease_s
            self.job_store.renew(self.owner, {r.job_id: r.progress for r in mine}, lease)
        # cancel flags are read every tick: a cancel acts at once
        state = self.job_store.states([r.job_id for r in mine])
        for running in mine:
            row = state.get(running.job_id)
            if row is None or row.owner != self.owner or row.status != "running":
                running.lost = True  # re-queued elsewhere after our lease expired, or purged
                running.cancel.set()
            elif row.cancel_requested:
                running.cancel.set()

    def _reap(self) -> None:
        """Re-queue (or fail) jobs whose owner stopped renewing; forget old finished jobs."""
        now = time.time()
        if now - self._last_reap < self._renew_every:
            return
        self._last_reap = now
        expired = self.job_store.requeue_expired(now, MAX_ATTEMPTS)
        if expired is None:
            self._purge(now)
            return
        requeued, abandoned = expired
        if requeued:
            logger.warning("%d training jobs lost their process and were queued again", requeued)
            self._wake.set()
        for job_id in abandoned:
            self.job_store.finish_if(
                job_id,
                "running",
                "failed",
                TrainingAbandoned(
                    f"the server process running this training stopped {MAX_ATTEMPTS} times "
                    "(see its log); the training was given up, send it again or with less work"
                ),
            )
        self._purge(now)

    def _purge(self, now: float) -> None:
        """Forget jobs that ended more than ``job_ttl_s`` ago (at most every ``PURGE_EVERY_S``)."""
        if now - self._last_purge > min(PURGE_EVERY_S, self.settings.job_ttl_s / 2):
            self._last_purge = now
            self.job_store.purge(now - self.settings.job_ttl_s)

    # -- one job -------------------------------------------------------------------------------
    def _progress(self, running: _Running, fraction: float) -> None:
        running.progress = max(running.progress, min(float(fraction), 0.99))

    def _run(self, running: _Running, task: TrainTask) -> None:
        started = time.monotonic()
        job_id = running.job_id
        try:
            outcome = self.executor.run(
                task,
                timeout_s=self.settings.train_timeout_s,
                cancelled=running.cancel,
                on_progress=lambda f: self._progress(running, f),
            )
        except Exception:
            logger.exception("training job %s could not run its worker", job_id)
            outcome = Outcome("failed", message="the worker process could not be started")
        try:
            if running.lost:
                logger.warning("job %s was taken over by another process; result dropped", job_id)
                return
            self._conclude(job_id, task, outcome)
        except Exception:
            logger.exception("job %s could not be concluded", job_id)
        finally:
            with self._lock:
                self._running.pop(job_id, None)
                self._threads.pop(job_id, None)
            self._wake.set()
            if self.metrics is not None:
                label = outcome.status if outcome.status != "invalid" else "failed"
                self.metrics.record_training(task.model_type, label, time.monotonic() - started)

    def _conclude(self, job_id: str, task: TrainTask, outcome: Outcome) -> None:
        if outcome.status == "succeeded" and outcome.result is not None:
            try:
                record = self.store.save(
                    outcome.result.estimator,
                    build_record(task, outcome.result),
                    replace_schema=bool(task.meta.get("replace_schema")),
                )
            except ApiError as exc:  # e.g. the name took another type meanwhile
                error: ApiError = exc
            except Exception:
                logger.exception("storing the model of job %s failed", job_id)
                error = TrainingFailed("the model was fitted but could not be stored")
            else:
                self.job_store.finish_if(
                    job_id, "running", "succeeded", model_id=record["model_id"]
                )
                return
        elif outcome.status == "cancelled":
            error = TrainingCancelled("the training was cancelled")
            self.job_store.finish_if(job_id, "running", "cancelled", error)
            return
        elif outcome.status == "timeout":
            error = TrainingTimeout(
                outcome.message,
                [detail("X", "fit took too long: send fewer rows or lower max_iter")],
            )
        elif outcome.status == "memory":
            error = TrainingOutOfMemory(
                outcome.message,
                [detail("X", "send fewer rows or features, or ask for a smaller model")],
            )
        elif outcome.status == "invalid":
            error = InvalidInput(
                f"the estimator rejected the data or parameters: {outcome.message}"
            )
        else:
            logger.error("training job %s failed: %s", job_id, outcome.message)
            error = TrainingFailed("the training failed; the server log has the details")
        self.job_store.finish_if(job_id, "running", "failed", error)

    def shutdown(self, wait_s: float = 15.0) -> None:
        """Stop claiming, stop this process's fits and put their jobs back in the queue."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            mine = list(self._running.values())
            threads = list(self._threads.values())
        for running in mine:
            running.lost = True
            running.cancel.set()
        for thread in threads:
            thread.join(timeout=wait_s)
        if self._dispatcher.is_alive():
            self._dispatcher.join(timeout=wait_s)
        if mine:
            self.job_store.release(self.owner)
