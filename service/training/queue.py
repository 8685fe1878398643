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
Its process claims it at once when it has a free slot (``submit`` takes the oldest queued job
as the dispatcher would; the row, its lease and its payload are the same), and the request
wakes on an in-process event when the job ends here; it reads the row every ``WAIT_POLL_S`` only
while the job is queued or runs in another process.

Jobs of other kinds (``batch_predict``) share the table, the leases, progress and cancel: the
queue runs them with the ``JobRunner`` given for their kind (``runners``), in a thread of the
dispatcher, and ends them with the runner's result (``jobs.result``) or the ``ApiError`` it
raised. A cancel or a lost lease sets the event the runner watches.

Storing the fitted model (``_save``): the model id is chosen once, the artifact put is
idempotent, and the model row commits in the transaction that ends the job, so nothing is ever
stored twice. When the artifact store or the database is unreachable (``repository.faults``), a
training acknowledged with 202 keeps its fitted model (in ``job_results``, or in memory while the
database is down), frees its fitting slot and retries with backoff for ``save_retry_s``, then
fails naming the back end; whoever runs the job after a crash stores the kept model instead of
fitting again. A synchronous training retries for ``SYNC_SAVE_RETRY_S`` and then answers 503.
Leases compare wall clocks of different hosts: keep them in sync (NTP) well within ``job_lease_s``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
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
    Unavailable,
    detail,
)
from service.model_types import ModelTypes
from service.repository.database import Database
from service.repository.faults import DATABASE, STORE, backend_down
from service.repository.jobs import RETRY_AFTER_S, JobLost, JobStore, new_job_id
from service.repository.store import PendingSave
from service.settings import Settings
from service.training.executors import Executor
from service.training.payload import decode_task, encode_task
from service.training.search_request import timeout_detail
from service.training.tasks import TrainTask, build_record
from service.training.worker import Outcome, path_main, run_in_process

logger = logging.getLogger("service.training.queue")

ACTIVE = ("queued", "running")
TICK_S = 0.25
MAX_ATTEMPTS = 2
PURGE_EVERY_S = 10.0
WAIT_POLL_S = 0.05
"""How often a request waiting on a job another process runs reads the job's row."""
LOCAL_WAIT_S = 1.0
"""Longest wait on the in-process end event of a job this process runs before the row is read
again (a safety net: the event is set as soon as the job's end is committed)."""
SYNC_SAVE_RETRY_S = 3.0
"""How long a synchronous training retries its save before answering 503 (its client retries)."""
SAVE_BACKOFF_S = (0.5, 30.0)
"""First and longest pause between two attempts of a failed save (doubling in between)."""
UNAVAILABLE = {DATABASE: "DATABASE_UNAVAILABLE", STORE: "STORE_UNAVAILABLE"}
TRAIN = "train"

JobRunner = Callable[[str, bytes, threading.Event, Callable[..., None]], dict[str, Any]]
"""Runs a job of a kind other than ``train``: ``(job_id, task bytes, cancelled, on_progress)``
→ the job's result (JSON-able); raises an ``ApiError`` (``TrainingCancelled`` once cancelled).
``on_progress(fraction, detail=None)``; ``detail`` is a ``ProgressDetail`` as a dict."""


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
class _Running:
    """A job this process runs: its cancel switch and latest progress."""

    job_id: str
    cancel: threading.Event
    progress: float = 0.1
    detail: dict[str, Any] | None = None
    """The latest ``ProgressDetail`` (passes, partitions, iterations), when the work gives one."""
    lost: bool = False
    saving: bool = False
    """The fit is over and its model is being stored: the job no longer takes a fitting slot."""


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
    runners : dict, optional
        Job kind → ``JobRunner`` for the jobs that are not trainings (``batch_predict``).
    """

    def __init__(
        self,
        settings: Settings,
        db: Database,
        store: Any,
        executor: Executor,
        model_types: ModelTypes,
        metrics: Any = None,
        runners: dict[str, JobRunner] | None = None,
    ) -> None:
        self.settings = settings
        self.runners = dict(runners or {})
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
        self._ended: dict[str, threading.Event] = {}
        """Set when a job this process ran has ended (its row committed); per waited job id."""
        self._claim_lock = threading.Lock()
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
        if not task.meta.get("background", True):
            self._ended.setdefault(job_id, threading.Event())
        try:  # a free slot here claims it at once (the oldest queued job, as the dispatcher would)
            self._claim({job_id: task})
        except Exception as exc:  # the dispatcher claims it later
            if backend_down(exc) is None:
                logger.exception("job %s could not be claimed at submit", job_id)
        self._wake.set()
        return self.get(job_id)

    def submit_job(
        self, kind: str, model_type: str, name: str, data: bytes, model_id: str | None = None
    ) -> dict[str, Any]:
        """Queue a job of ``kind`` (one of ``runners``) with its task bytes (and the model it
        uses); its view."""
        if kind not in self.runners:
            raise ValueError(f"no runner for jobs of kind {kind!r}")
        job_id = new_job_id()
        self.job_store.add(
            job_id, model_type, name, data, self.settings.max_queued, kind=kind, model_id=model_id
        )
        self._wake.set()
        return self.get(job_id)

    def wait(self, job_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until ``job_id`` ends; its model record, or raise the error it ended with."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ended = self._ended.setdefault(job_id, threading.Event())
        try:
            while True:
                view = self.get(job_id)
                if view["status"] not in ACTIVE:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise TrainingTimeout(f"job {job_id} did not finish in {timeout_s:g} s")
                ended.wait(self._wait_step(job_id))
        finally:
            self._ended.pop(job_id, None)
        if view["status"] == "succeeded" and view["model_id"]:
            return self.store.get_record(view["model_id"])
        raise error_of(view)

    def _wait_step(self, job_id: str) -> float:
        """How long to wait on a job's end event: long while this process runs it (the event
        comes), ``WAIT_POLL_S`` while it is queued or runs elsewhere (only its row tells)."""
        with self._lock:
            running = self._running.get(job_id)
        return LOCAL_WAIT_S if running is not None and not running.lost else WAIT_POLL_S

    def _job_ended(self, job_id: str) -> None:
        """Wake whoever waits on ``job_id`` in this process (its end is committed, or it left
        this process)."""
        ended = self._ended.get(job_id)
        if ended is not None:
            ended.set()

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
            except Exception as exc:
                if backend_down(exc) is None:
                    logger.exception("the job dispatcher hit an error; it carries on")
                else:  # the outage itself is logged once, where it starts and ends
                    logger.debug("the job dispatcher waits for its back end", exc_info=True)
            self._wake.wait(TICK_S)
            self._wake.clear()

    def _claim(self, known: dict[str, TrainTask] | None = None) -> None:
        """Take queued jobs, oldest first, while this process has free slots (the dispatcher's
        tick, and ``submit``); ``known``: tasks in hand by job id, not decoded again."""
        with self._claim_lock:  # the dispatcher and submitting requests share the slots
            while self._fitting() < self.settings.train_concurrency and not self._stop.is_set():
                claimed = self.job_store.claim_oldest(self.owner, self.settings.job_lease_s)
                if claimed is None:
                    return
                self._start(*claimed, known=(known or {}).get(claimed[0]))

    def _fitting(self) -> int:
        """Jobs of this process still fitting (those storing their model take no slot)."""
        with self._lock:
            return sum(not r.saving for r in self._running.values())

    def _start(
        self, job_id: str, data: bytes | None, kind: str = TRAIN, known: TrainTask | None = None
    ) -> None:
        if kind != TRAIN:
            self._start_other(job_id, data, kind)
            return
        kept: PendingSave | None = None
        try:
            if data is None:
                raise KeyError("payload missing")
            task = known if known is not None else decode_task(data, self.model_types)
            held = self.job_store.kept_result(job_id)
            if held is not None:  # fitted before its last owner stopped: store it, fit nothing
                kept = self.store.pending_from(*held)
        except (DatabaseUnavailable, StoreUnavailable):
            raise  # claimed but not started: its lease runs out and it is queued again
        except ApiError as exc:  # the kept bytes failed their check
            logger.error("job %s: %s", job_id, exc.message)
            self.job_store.finish_if(job_id, "running", "failed", exc)
            return
        except Exception:
            logger.exception("job %s cannot be read back; failed", job_id)
            self.job_store.finish_if(
                job_id,
                "running",
                "failed",
                TrainingFailed("the job's task could not be read (unknown model type?)"),
            )
            return
        running = _Running(job_id, threading.Event(), saving=kept is not None)
        thread = threading.Thread(
            target=self._run, args=(running, task, kept), name=f"train-{job_id}", daemon=True
        )
        with self._lock:
            self._running[job_id] = running
            self._threads[job_id] = thread
            thread.start()

    def _start_other(self, job_id: str, data: bytes | None, kind: str) -> None:
        """Run a job of another kind with its runner, in a thread of its own."""
        runner = self.runners.get(kind)
        if runner is None or data is None:
            logger.error("job %s of kind %s cannot run here; failed", job_id, kind)
            self.job_store.finish_if(
                job_id, "running", "failed", TrainingFailed(f"no runner for {kind} jobs")
            )
            return
        running = _Running(job_id, threading.Event())
        thread = threading.Thread(
            target=self._run_other,
            args=(running, runner, data, kind),
            name=f"{kind}-{job_id}",
            daemon=True,
        )
        with self._lock:
            self._running[job_id] = running
            self._threads[job_id] = thread
            thread.start()

    def _run_other(self, running: _Running, runner: JobRunner, data: bytes, kind: str) -> None:
        """The runner's result ends the job ``succeeded``; its ``ApiError`` ends it ``failed``
        (``cancelled`` for a cancel); a job taken over is left to its new owner."""
        job_id = running.job_id
        try:
            try:
                result = runner(
                    job_id, data, running.cancel, lambda f, d=None: self._progress(running, f, d)
                )
            except TrainingCancelled as exc:
                if not running.lost:
                    self._end(running, "cancelled", exc)
                return
            except ApiError as exc:
                if not running.lost:
                    self._end(running, "failed", exc)
                return
            except Exception:
                logger.exception("%s job %s failed", kind, job_id)
                if not running.lost:
                    self._end(
                        running, "failed", TrainingFailed(f"the {kind} job failed; see the log")
                    )
                return
            if running.lost:
                logger.warning("job %s was taken over by another process; result dropped", job_id)
                return
            self.job_store.finish_if(
                job_id, "running", "succeeded", result=result, detail=running.detail
            )
        except Exception:
            logger.exception("job %s could not be concluded", job_id)
        finally:
            with self._lock:
                self._running.pop(job_id, None)
                self._threads.pop(job_id, None)
            self._job_ended(job_id)
            self._wake.set()

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
            self.job_store.renew(
                self.owner,
                {r.job_id: r.progress for r in mine},
                lease,
                {r.job_id: r.detail for r in mine if r.detail is not None},
            )
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
    def _progress(
        self, running: _Running, fraction: float, detail: dict[str, Any] | None = None
    ) -> None:
        running.progress = max(running.progress, min(float(fraction), 0.99))
        if detail is not None:
            running.detail = detail

    def _run(self, running: _Running, task: TrainTask, kept: PendingSave | None = None) -> None:
        started = time.monotonic()
        job_id = running.job_id
        if kept is not None:
            outcome = Outcome("succeeded")
            logger.warning("job %s: storing the model its last owner fitted", job_id)
        else:
            try:
                outcome = self.executor.run(
                    task,
                    timeout_s=self.settings.train_timeout_s,
                    cancelled=running.cancel,
                    on_progress=lambda f, d=None: self._progress(running, f, d),
                )
            except Exception:
                logger.exception("training job %s could not run its worker", job_id)
                outcome = Outcome("failed", message="the worker process could not be started")
        try:
            if running.lost:
                logger.warning("job %s was taken over by another process; result dropped", job_id)
                return
            if outcome.status == "succeeded" and (kept or outcome.result) is not None:
                outcome.status = self._save(running, task, outcome, kept)
            else:
                self._conclude(job_id, task, outcome, running.detail)
        except Exception:
            logger.exception("job %s could not be concluded", job_id)
        finally:
            with self._lock:
                self._running.pop(job_id, None)
                self._threads.pop(job_id, None)
            self._job_ended(job_id)
            self._wake.set()
            if self.metrics is not None:
                label = outcome.status if outcome.status != "invalid" else "failed"
                self.metrics.record_training(task.model_type, label, time.monotonic() - started)
        if task.spec.nu_path and outcome.status == "succeeded" and outcome.result is not None:
            self._store_path(job_id, task, outcome.result.estimator)

    def _store_path(self, job_id: str, task: TrainTask, estimator: Any) -> None:
        """After the job ended (its answer is not kept waiting): the stored model's ν path, in a
        worker process on the task's rows, into its record (``plot_data.path``)."""
        try:
            ended = self.job_store.ended_with(job_id)
            if ended is None or ended[0] != "succeeded" or ended[1] is None:
                return
            outcome = run_in_process(
                task,
                timeout_s=self.settings.train_timeout_s,
                cancelled=self._stop,
                target=path_main,
                extra_args=(estimator,),
            )
            path = outcome.result if outcome.status == "succeeded" else None
            if path is None:
                path = {"error": f"the path was not computed ({outcome.status}: {outcome.message})"}
            self.store.registry.set_plot_data(ended[1], "path", path)
        except Exception:
            logger.exception("job %s: the model's path could not be stored", job_id)

    # -- storing a fitted model ----------------------------------------------------------------
    def _save(
        self, running: _Running, task: TrainTask, outcome: Outcome, kept: PendingSave | None
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
        running.saving = True
        self._wake.set()  # the fitting slot is free
        if kept is None:
            assert outcome.result is not None
            try:
                pending = self.store.prepare(
                    outcome.result.estimator, build_record(task, outcome.result)
                )
            except Exception:
                logger.exception("the model of job %s could not be serialised", job_id)
                self._end(running, "failed", TrainingFailed("the fitted model could not be saved"))
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
                self.store.save_prepared(
                    pending,
                    replace_schema=bool(task.meta.get("replace_schema")),
                    then=lambda conn, record: self.job_store.finish_saved(
                        conn, job_id, self.owner, record["model_id"], running.detail
                    ),
                )
            except JobLost:  # taken over or cancelled meanwhile; the row was rolled back
                return self._after_lost(running, pending, in_row)
            except Exception as exc:
                backend = backend_down(exc)
                if backend is None and isinstance(exc, ApiError):  # e.g. the name took another
                    self._end(running, "failed", exc)  # type meanwhile
                    return "failed"
                if backend is None:  # save_prepared removed what it wrote
                    logger.exception("storing the model of job %s failed", job_id)
                    self._end(
                        running,
                        "failed",
                        TrainingFailed("the model was fitted but could not be stored"),
                    )
                    return "failed"
                failures += 1
                logger.warning(
                    "job %s: the %s is unreachable while storing model %s (attempt %d): %s",
                    job_id,
                    backend,
                    pending.model_id,
                    failures,
                    exc,
                    extra={"fields": {"job_id": job_id, "model_id": pending.model_id}},
                )
                if self._ended_with(job_id, pending.model_id):
                    return "succeeded"  # the commit went through; only its answer was lost
                if background and not in_row:
                    in_row = self._keep(running, pending)
                if running.cancel.is_set():
                    return self._after_lost(running, pending, in_row)
                if time.monotonic() >= deadline:
                    self._give_up(running, pending, backend, background)
                    return "failed"
                running.cancel.wait(min(pause, max(deadline - time.monotonic(), 0.0)))
                pause = min(pause * 2, SAVE_BACKOFF_S[1])
            else:
                return "succeeded"

    def _keep(self, running: _Running, pending: PendingSave) -> bool:
        """Keep the fitted model in the job's row; False when the database cannot take it now."""
        try:
            return self.job_store.keep_result(
                running.job_id, self.owner, pending.model_id, pending.record, pending.data
            )
        except Exception as exc:
            logger.warning("job %s: model kept in memory only (%s)", running.job_id, exc)
            return False

    def _ended_with(self, job_id: str, model_id: str) -> bool:
        """True when the job already ended ``succeeded`` with ``model_id`` (False if unknown)."""
        try:
            state = self.job_store.ended_with(job_id)
        except Exception:
            return False
        return state == ("succeeded", model_id)

    def _after_lost(self, running: _Running, pending: PendingSave, in_row: bool) -> str:
        """The job stopped being ours while storing, or was cancelled: record the cancel, and
        remove the artifact unless the job ended with this very model or another process took
        the job over with the model kept in its row (it stores it under the same id)."""
        job_id = running.job_id
        if self._ended_with(job_id, pending.model_id):
            return "succeeded"
        if not running.lost:  # a cancel request, not a takeover
            self.store.discard_artifact(pending.model_id)
            self._end(running, "cancelled", TrainingCancelled("the training was cancelled"))
            return "cancelled"
        logger.warning("job %s was taken over while storing its model; left to its owner", job_id)
        if not in_row:  # the new owner fits again and stores under an id of its own
            self.store.discard_artifact(pending.model_id)
        return "cancelled"

    def _give_up(
        self, running: _Running, pending: PendingSave, backend: str, background: bool
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
        self._end(running, "failed", unavailable(backend, message))

    def _end(self, running: _Running, status: str, error: ApiError) -> None:
        """End the job as ``status``, retrying the write while the database is down (until the
        job is taken over, which the heartbeat notices once the database answers again)."""
        pause = SAVE_BACKOFF_S[0]
        while not running.lost and not self._stop.is_set():
            try:
                self.job_store.finish_if(
                    running.job_id, "running", status, error, detail=running.detail
                )
                return
            except Exception as exc:
                if backend_down(exc) is None:
                    raise
                logger.warning("job %s: its end cannot be written yet: %s", running.job_id, exc)
            self._stop.wait(pause)
            pause = min(pause * 2, SAVE_BACKOFF_S[1])

    def _conclude(
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

    def shutdown(self, wait_s: float = 15.0) -> None:
        """Stop claiming, stop this process's fits and put their jobs back in the queue."""
        self._stop.set()
        self._wake.set()
        if self._dispatcher.is_alive():  # first: a job it is claiming now is then in the list
            self._dispatcher.join(timeout=wait_s)
        with self._lock:
            mine = list(self._running.values())
            threads = list(self._threads.values())
        for running in mine:
            running.lost = True
            running.cancel.set()
        for thread in threads:
            thread.join(timeout=wait_s)
        try:
            self.job_store.release(self.owner)
        except Exception:  # the database is down: the leases expire and the jobs run elsewhere
            logger.warning("could not put this process's jobs back in the queue", exc_info=True)
