"""Where a training runs: a worker process on this machine, or a dask cluster.

``LocalExecutor`` runs each fit in a local process of its own (``run_in_process``; a warm one
started ahead, ``BSVM_WARM_WORKERS``), with ``n_jobs=1``.

``DaskExecutor`` submits one task per fit to a dask scheduler. On the dask worker that task
secedes from the worker's thread pool (so the cluster's threads stay free for the fit's own
pieces) and runs the fit in a subprocess, again through ``run_in_process``, so that a timeout or a
cancel kills the work for real (``Future.cancel`` cannot stop a running thread). The subprocess
connects its own client and fits under ``joblib.parallel_config(backend="dask")`` with
``n_jobs=-1``: the joblib pieces of a fit (MCMC chains) spread over the cluster. Per job, a dask
``Event`` carries a cancel from the service to the worker and a dask ``Queue`` carries progress
back. The service enforces the timeout as well: it stops waiting, sets the event and cancels the
future. The fitted estimator comes back pickled over dask's comms, between server components.

The dask worker processes must not be daemonic (a daemonic process cannot start the fit's
subprocess): run them with ``DASK_DISTRIBUTED__WORKER__DAEMON=False``. ``distributed`` is
imported only by the dask path (the ``dask`` extra).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from service.repository.local_files import LocalArtifact
from service.settings import Settings
from service.training.warm_workers import WarmWorkers
from service.training.worker import (
    PRELOAD,
    Outcome,
    TrainTask,
    WorkerMessage,
    progress_payload,
    relay_progress,
    run_in_process,
    warm_up,
    worker_context,
    worker_main,
)

logger = logging.getLogger("service.training.executors")

STAGES = (0.1, 0.15, 0.9)
"""Progress values always relayed from a dask worker; others at most every ``RELAY_INTERVAL_S``."""
RELAY_INTERVAL_S = 0.1
DASK_PRELOAD = [*PRELOAD, "distributed", "joblib._dask", "service.training.executors"]
"""What a dask worker's training forkserver imports once, so each fit's process starts fast."""
CONNECT_TIMEOUT_S = 30.0


class Executor(Protocol):
    """Runs one ``TrainTask`` to an ``Outcome``; stops it on timeout or when ``cancelled`` is set."""

    writes_artifacts: bool
    """Whether ``run`` takes ``artifact``: its worker writes the fitted model there itself."""

    def run(
        self,
        task: TrainTask,
        *,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[..., None],
    ) -> Outcome:
        """Fit ``task`` and report fractions 0..1 to ``on_progress`` while it runs (with a
        ``ProgressDetail`` dict as second argument when the fit gives one)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (connections); ``run`` is not called afterwards."""
        ...


class LocalExecutor:
    """Each fit in a process of its own on this machine, one core (``n_jobs=1``): one of
    ``warm_workers`` started ahead and waiting (``WarmWorkers``), else a fresh one."""

    writes_artifacts = True
    """``run`` takes ``artifact``: the worker writes the fitted model there itself."""

    def __init__(self, warm_workers: int = 1) -> None:
        self.warm = WarmWorkers(warm_workers)
        self._held = threading.local()

    def run(
        self,
        task: TrainTask,
        *,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[..., None] = lambda f, d=None: None,
        artifact: LocalArtifact | None = None,
    ) -> Outcome:
        """``run_in_process`` with the task's estimator as built (``n_jobs=1``); the warm worker
        it took is replaced once it ends, or once ``refill_after``'s block does. ``artifact``:
        where the worker writes the fitted model's bytes (``fitting.fit_and_evaluate``)."""
        try:
            return run_in_process(
                task,
                timeout_s=timeout_s,
                cancelled=cancelled,
                on_progress=on_progress,
                warm=self.warm.take(),
                artifact=artifact,
            )
        finally:
            if not getattr(self._held, "on", False):
                self.warm.refill()

    @contextlib.contextmanager
    def refill_after(self) -> Iterator[None]:
        """In this block, a ``run`` in this thread starts its warm worker's replacement when the
        block ends, not when the fit does.

        The job queue holds it over a job's save and answer: starting a worker process then
        (a forkserver round trip in a thread here, then the new process priming itself on a
        core) competed with the save's statements and flushes for the GIL and the two cores,
        ~4 ms of a breast-cancer save (9-10 ms against 13-14, in process, load 2.5).
        """
        self._held.on = True
        try:
            yield
        finally:
            self._held.on = False
            self.warm.refill()

    def warm_up(self) -> None:
        """Start the local training forkserver and the warm workers now, not at the first fit."""
        warm_up()
        self.warm.fill()

    def close(self) -> None:
        """Stop the warm workers (every fit's process ends with its fit)."""
        self.warm.close()


class DaskExecutor:
    """Each fit as one task on the dask cluster at ``scheduler_address`` (see the module notes)."""

    writes_artifacts = False
    """The cluster's workers send the model back; the server's save writes it."""

    def __init__(
        self,
        scheduler_address: str,
        *,
        poll_s: float = 0.1,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.scheduler_address = scheduler_address
        self.poll_s = poll_s
        self.connect_timeout_s = connect_timeout_s
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The service's ``distributed.Client`` (connected at first use, not the default client)."""
        with self._lock:
            if self._client is None:
                from distributed import Client

                self._client = Client(
                    self.scheduler_address, set_as_default=False, timeout=self.connect_timeout_s
                )
            return self._client

    def run(
        self,
        task: TrainTask,
        *,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[..., None] = lambda f, d=None: None,
    ) -> Outcome:
        """Submit the fit, relay its progress, and stop it on timeout or cancel."""
        deadline = time.monotonic() + timeout_s
        try:
            client = self.client()
        except Exception as exc:
            logger.exception("cannot reach the dask scheduler at %s", self.scheduler_address)
            return Outcome("failed", message=f"dask scheduler unreachable: {type(exc).__name__}")
        from distributed import Event, Queue

        name = f"bsvm-{uuid.uuid4().hex}"
        stop = Event(f"{name}-cancel", client=client)
        progress = Queue(f"{name}-progress", client=client)
        future = client.submit(
            run_on_dask_worker,
            task,
            self.scheduler_address,
            name,
            timeout_s,
            key=f"{name}-fit",
            pure=False,
        )
        try:
            return self._follow(future, stop, progress, deadline, timeout_s, cancelled, on_progress)
        except Exception:
            logger.exception("lost track of dask training task %s", future.key)
            with contextlib.suppress(Exception):
                stop.set()
                future.cancel()
            return Outcome("failed", message="lost track of the training on the dask cluster")
        finally:
            try:
                progress.close()
            except Exception:
                logger.debug("could not release the progress queue of %s", name, exc_info=True)

    def _follow(
        self,
        future: Any,
        stop: Any,
        progress: Any,
        deadline: float,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[..., None],
    ) -> Outcome:
        """Relay progress until the task ends; on cancel or timeout set ``stop`` and cancel it."""
        while True:
            for value in progress.get(batch=True):
                relay_progress(on_progress, value)
            if future.done():
                break
            if cancelled.is_set() or time.monotonic() >= deadline:
                stop.set()  # the worker kills the fit's process
                future.cancel()
                if cancelled.is_set():
                    return Outcome("cancelled", message="cancelled by request")
                return Outcome(
                    "timeout", message=f"training exceeded the time limit of {timeout_s:g} s"
                )
            time.sleep(self.poll_s)
        for value in progress.get(batch=True):
            relay_progress(on_progress, value)
        if future.status == "finished":
            return future.result()
        if future.status == "cancelled":
            return Outcome("failed", message="the dask task was cancelled on the cluster")
        exc = future.exception()
        logger.error("dask training task %s ended with %r", future.key, exc)
        return Outcome("failed", message=f"dask task failed: {type(exc).__name__}")

    def warm_up(self) -> None:
        """Start the training forkserver of every worker of the cluster now (connects the client)."""
        self.client().run(prepare_dask_worker)

    def close(self) -> None:
        """Close the client (running fits on the cluster lose their waiter and are released)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def make_executor(settings: Settings) -> Executor:
    """``DaskExecutor`` when ``settings.dask_scheduler`` is set, else ``LocalExecutor``."""
    if settings.dask_scheduler:
        return DaskExecutor(settings.dask_scheduler)
    return LocalExecutor(settings.warm_workers)


# -- the dask worker's side ----------------------------------------------------------------------
def prepare_dask_worker() -> None:
    """On a dask worker: have the training forkserver preload ``distributed`` too, and start it."""
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(DASK_PRELOAD)  # no effect once the forkserver runs
    warm_up()


class _Relay:
    """Pass progress to ``send``: the stage values always, others at most every interval."""

    def __init__(self, send: Callable[[Any], Any], interval_s: float = RELAY_INTERVAL_S) -> None:
        self._send, self._interval_s, self._last = send, interval_s, float("-inf")

    def __call__(self, fraction: float, detail: dict[str, Any] | None = None) -> None:
        now = time.monotonic()
        if fraction in STAGES or now - self._last >= self._interval_s:
            self._last = now
            try:
                self._send(progress_payload(fraction, detail))
            except Exception:  # the service stopped listening; the fit goes on or gets killed
                logger.debug("progress relay failed", exc_info=True)


def _watch(stop: Any, cancelled: threading.Event, finished: threading.Event) -> None:
    """Set ``cancelled`` once the dask event ``stop`` is set; end when ``finished`` is."""
    while not finished.is_set():
        try:
            if stop.wait(timeout=0.25):
                cancelled.set()
                return
        except Exception:  # scheduler unreachable for now; the fit's own timeout still holds
            logger.debug("cannot read the cancel event", exc_info=True)
            finished.wait(0.25)


def run_on_dask_worker(
    task: TrainTask, scheduler_address: str, name: str, timeout_s: float
) -> Outcome:
    """The dask task: secede, run ``dask_fit_main`` in a subprocess, kill it on the job's event."""
    from distributed import Event, Queue, get_client, secede

    secede()
    prepare_dask_worker()
    if multiprocessing.current_process().daemon:
        return Outcome(
            "failed",
            message="the dask worker is a daemonic process and cannot start the fit's process; "
            "start workers with DASK_DISTRIBUTED__WORKER__DAEMON=False",
        )
    client = get_client()
    stop = Event(f"{name}-cancel", client=client)
    progress = Queue(f"{name}-progress", client=client)
    cancelled, finished = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=_watch, args=(stop, cancelled, finished), name=f"{name}-watch", daemon=True
    )
    watcher.start()
    try:
        return run_in_process(
            task,
            timeout_s=timeout_s,
            cancelled=cancelled,
            on_progress=_Relay(progress.put),
            target=dask_fit_main,
            extra_args=(scheduler_address,),
        )
    finally:
        finished.set()
        watcher.join(timeout=5)
        with contextlib.suppress(Exception):
            progress.close()
            stop.clear()  # forgotten by the scheduler unless the service sets it after this


def dask_fit_main(task: TrainTask, messages: Any, scheduler_address: str) -> None:
    """The fit's subprocess on a dask worker: ``worker_main`` with its joblib pieces on the cluster."""
    try:
        import joblib
        from distributed import Client

        client = Client(scheduler_address, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:
        messages.put(
            WorkerMessage(
                "failed", f"the fit could not connect to the dask scheduler: {exc!r}"[:500]
            )
        )
        return
    try:
        with joblib.parallel_config(backend="dask"):
            worker_main(task, messages, n_jobs=-1)
    finally:
        client.close()
