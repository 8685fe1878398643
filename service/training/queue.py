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
  jobs after ``job_ttl_s`` (these three: ``lease_upkeep``).

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
raised (``other_jobs``). A cancel or a lost lease sets the event the runner watches.

Storing the fitted model, with its retries through outages, and ending a job that has none:
``finishing.JobFinisher``; the ν path after the job ended: ``nu_path_job``.
Leases compare wall clocks of different hosts: keep them in sync (NTP) well within ``job_lease_s``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from service.errors import (
    ApiError,
    DatabaseUnavailable,
    NotFound,
    StoreUnavailable,
    TrainingCancelled,
    TrainingFailed,
    TrainingTimeout,
)
from service.model_types import ModelTypes
from service.repository.database import Database
from service.repository.faults import backend_down
from service.repository.jobs import JobStore, new_job_id
from service.repository.local_files import LocalArtifact
from service.repository.store import PendingSave, new_model_id
from service.settings import Settings
from service.training.executors import Executor
from service.training.finishing import JobFinisher, Running, error_of
from service.training.lease_upkeep import LeaseUpkeep
from service.training.nu_path_job import store_path
from service.training.other_jobs import JobRunner, run_other
from service.training.payload import decode_task, encode_task
from service.training.tasks import TrainTask
from service.training.worker import Outcome

logger = logging.getLogger("service.training.queue")

ACTIVE = ("queued", "running")
TICK_S = 0.25
WAIT_POLL_S = 0.05
"""How often a request waiting on a job another process runs reads the job's row."""
LOCAL_WAIT_S = 1.0
"""Longest wait on the in-process end event of a job this process runs before the row is read
again (a safety net: the event is set as soon as the job's end is committed)."""
TRAIN = "train"


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
        self._running: dict[str, Running] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ended: dict[str, threading.Event] = {}
        """Set when a job this process ran has ended (its row committed); per waited job id."""
        self._answers: dict[str, dict[str, Any]] = {}
        """The stored model's record of a waited job this process ended ``succeeded`` (the
        request answers with it instead of reading the job's and the model's rows again)."""
        self._claim_lock = threading.Lock()
        self.leases = LeaseUpkeep(settings, self.job_store, self.owner, self._wake)
        self._dispatcher = threading.Thread(target=self._loop, name="job-dispatcher", daemon=True)
        self.finisher = JobFinisher(
            settings, store, self.job_store, self.owner, self._wake, self._stop
        )

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
        background = bool(task.meta.get("background", True))
        if not background:  # its request waits: its row's commit need not wait for the disk
            self._ended.setdefault(job_id, threading.Event())
        with self._claim_lock:  # a free slot here, and no job queued before it: claimed as added
            free = self._fitting() < self.settings.train_concurrency and not self._stop.is_set()
            claim = (self.owner, self.settings.job_lease_s) if free else None
            try:
                claimed = self.job_store.add(
                    job_id, task.model_type, task.meta["name"], data, self.settings.max_queued,
                    claim=claim, durable=background,
                )  # fmt: skip
            except BaseException:
                self._ended.pop(job_id, None)
                raise
            try:  # under the lock: the dispatcher counts it among the fits before it claims
                if claimed:
                    self._start(job_id, data, known=task, fresh=True)
            except Exception:  # its lease runs out and it is queued again
                logger.exception("job %s could not be started at submit", job_id)
        try:  # else a free slot claims the oldest queued job at once, as the dispatcher would
            if not claimed:
                self._claim({job_id: task})
        except Exception as exc:  # the dispatcher claims it later
            if backend_down(exc) is None:
                logger.exception("job %s could not be claimed at submit", job_id)
        if not claimed:  # a job claimed here needs no tick now (its lease is fresh): waking the
            self._wake.set()  # dispatcher would run its statements beside the fit's start
        return self.get(job_id)

    def submit_job(
        self,
        kind: str,
        model_type: str,
        name: str,
        data: bytes,
        model_id: str | None = None,
        target: str | None = None,
    ) -> dict[str, Any]:
        """Queue a job of ``kind`` (one of ``runners``) with its task bytes (and the model it
        uses, and where it writes: 409 while another active job writes there); its view."""
        if kind not in self.runners:
            raise ValueError(f"no runner for jobs of kind {kind!r}")
        job_id = new_job_id()
        self.job_store.add(
            job_id,
            model_type,
            name,
            data,
            self.settings.max_queued,
            kind=kind,
            model_id=model_id,
            target=target,
        )
        self._wake.set()
        return self.get(job_id)

    def wait(self, job_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until ``job_id`` ends; its model record, or raise the error it ended with."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            ended = self._ended.setdefault(job_id, threading.Event())
        try:
            while True:
                with self._lock:
                    record = self._answers.pop(job_id, None)
                if record is not None:  # stored here: its rows committed just now
                    return record
                view = self.get(job_id)
                if view["status"] not in ACTIVE:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise TrainingTimeout(f"job {job_id} did not finish in {timeout_s:g} s")
                ended.wait(self._wait_step(job_id))
        finally:
            with self._lock:
                self._ended.pop(job_id, None)
                self._answers.pop(job_id, None)
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
                with self._lock:
                    mine = list(self._running.values())
                self.leases.heartbeat(mine)
                self.leases.reap()
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
        self,
        job_id: str,
        data: bytes | None,
        kind: str = TRAIN,
        known: TrainTask | None = None,
        fresh: bool = False,
    ) -> None:
        """Run a claimed job in a thread; ``fresh``: just added, so no earlier owner kept a
        fitted model in its row."""
        if kind != TRAIN:
            self._start_other(job_id, data, kind)
            return
        kept: PendingSave | None = None
        try:
            if data is None:
                raise KeyError("payload missing")
            task = known if known is not None else decode_task(data, self.model_types)
            held = None if fresh else self.job_store.kept_result(job_id)
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
        running = Running(job_id, threading.Event(), saving=kept is not None)
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
        running = Running(job_id, threading.Event())
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

    def _run_other(self, running: Running, runner: JobRunner, data: bytes, kind: str) -> None:
        """``other_jobs.run_other``, then the job leaves this process."""
        try:
            run_other(
                running,
                runner,
                data,
                kind,
                lambda f, d=None: self._progress(running, f, d),
                self.finisher,
                self.job_store,
            )
        finally:
            self._forget(running.job_id)

    def _forget(self, job_id: str) -> None:
        """This process no longer runs ``job_id``: its slot is free, its waiters (handed the
        stored model's record, when there is one) and the dispatcher wake."""
        with self._lock:
            running = self._running.pop(job_id, None)
            self._threads.pop(job_id, None)
            if running is not None and running.record is not None and job_id in self._ended:
                self._answers[job_id] = running.record
        self._job_ended(job_id)
        self._wake.set()

    # -- one job -------------------------------------------------------------------------------
    def _progress(
        self, running: Running, fraction: float, detail: dict[str, Any] | None = None
    ) -> None:
        running.progress = max(running.progress, min(float(fraction), 0.99))
        if detail is not None:
            running.detail = detail

    def _run(self, running: Running, task: TrainTask, kept: PendingSave | None = None) -> None:
        """Fit, store and end the job; then its ν path, if its model type has one."""
        held = getattr(self.executor, "refill_after", None)  # a new warm worker after the answer
        with held() if held is not None else contextlib.nullcontext():
            outcome = self._fit_and_end(running, task, kept)
        if task.spec.nu_path and outcome.status == "succeeded" and outcome.result is not None:
            store_path(
                running.job_id,
                task,
                outcome.result.estimator,
                self.settings,
                self.store,
                self.job_store,
                self._stop,
            )

    def _fit_and_end(self, running: Running, task: TrainTask, kept: PendingSave | None) -> Outcome:
        """Fit the task (unless ``kept`` holds its model), store the model, end the job; how the
        fit ended."""
        started = time.monotonic()
        job_id = running.job_id
        if kept is not None:
            outcome = Outcome("succeeded")
            logger.warning("job %s: storing the model its last owner fitted", job_id)
        else:
            running.artifact = self._artifact_slot()
            where = {} if running.artifact is None else {"artifact": running.artifact}
            try:
                outcome = self.executor.run(
                    task,
                    timeout_s=self.settings.train_timeout_s,
                    cancelled=running.cancel,
                    on_progress=lambda f, d=None: self._progress(running, f, d),
                    **where,
                )
            except Exception:
                logger.exception("training job %s could not run its worker", job_id)
                outcome = Outcome("failed", message="the worker process could not be started")
        try:
            if running.lost:
                logger.warning("job %s was taken over by another process; result dropped", job_id)
                self._discard_unsaved(running, outcome)
                return Outcome("lost")  # nor its path: the job is no longer this process's
            if outcome.status == "succeeded" and (kept or outcome.result) is not None:
                outcome.status = self._save(running, task, outcome, kept)
            else:
                self._discard_unsaved(running, outcome)
                self.finisher.conclude(job_id, task, outcome, running.detail)
        except Exception:
            logger.exception("job %s could not be concluded", job_id)
        finally:
            self._forget(job_id)
            if outcome.written is not None:  # the worker goes now, after the job's end
                outcome.written.close()
            if self.metrics is not None:
                label = outcome.status if outcome.status != "invalid" else "failed"
                self.metrics.record_training(task.model_type, label, time.monotonic() - started)
        return outcome

    def _artifact_slot(self) -> LocalArtifact | None:
        """Where the worker may write the model it fits, under a model id chosen now: a local
        artifact folder with an executor whose workers write there (``LocalExecutor``); else
        None (the save puts the bytes)."""
        if not self.executor.writes_artifacts:
            return None
        return self.store.artifacts.slot(new_model_id())

    def _discard_unsaved(self, running: Running, outcome: Outcome) -> None:
        """Remove what the worker may have written of a model that is not stored (its fit ended
        otherwise, after the file was written; or the job left this process), once the worker
        is gone."""
        if outcome.written is not None:
            outcome.written.close()
        if running.artifact is not None and os.path.isdir(running.artifact.folder):
            self.store.discard_artifact(running.artifact.model_id)

    def _save(
        self, running: Running, task: TrainTask, outcome: Outcome, kept: PendingSave | None
    ) -> str:
        """``JobFinisher.save``: store the fitted model; how the job ended (for the metrics)."""
        return self.finisher.save(running, task, outcome, kept)

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
