"""One training, run in its own worker process so that a timeout or a cancel can stop it for real.

The parent validates the data and builds a ``TrainTask`` (``tasks``); ``run_in_process`` starts a worker
(``forkserver`` where available, with the numeric stack preloaded and each quick model type fitted
once, ``warm_up``; else ``spawn``) or hands the task to a warm one already waiting for it
(``warm_workers``), relays its progress messages, and kills it on timeout or cancel. The worker reports coarse stages: 0.1 when
it has started, 0.15 when fitting starts (estimators with a progress hook fill 0.15..0.85), 0.9 when
evaluated; the parent sets 1.0 once the model is stored.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue as queue_mod
import resource
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from service.data.loading import DataReadError
from service.plots.data import later_keys, later_plot_data
from service.repository.local_files import LocalArtifact
from service.training.artifact_write import WriteWait
from service.training.fitting import FitResult, fit_evaluate_writing
from service.training.messages import Messages, widen
from service.training.tasks import TrainTask

logger = logging.getLogger("service.training.worker")

PRELOAD = [
    "service.training.worker",
    "service.training.fitting",
    "bsvm_core",
    "bsvm_core.lda",
    "bsvm_core.qda",
    "bsvm_core.linear_svm",
    "bsvm_core.kernel_svm",
    "bsvm_core.bayesian_svm",
    "bsvm_core.solvers.bayes_em",
    "bsvm_core.solvers.bayes_ecme",
    "bsvm_core.solvers.bayes_em_finish",
    "service.training.priming",
    "service.training.artifact_write",
    "service.training.warm_up",  # last: fits each quick model type once (first calls warm)
]
_CONTEXT: Any = None
_CONTEXT_LOCK = threading.Lock()


def progress_payload(fraction: float, detail: dict[str, Any] | None = None) -> Any:
    """A ``progress`` message's payload: the fraction, or ``(fraction, detail)``."""
    return float(fraction) if detail is None else (float(fraction), detail)


def relay_progress(on_progress: Callable[..., None], payload: Any) -> None:
    """Call ``on_progress(fraction)``, or ``on_progress(fraction, detail)`` when there is one."""
    if isinstance(payload, tuple | list):
        on_progress(float(payload[0]), payload[1])
    else:
        on_progress(float(payload))


@dataclass(frozen=True)
class WorkerMessage:
    """One message from a worker: ``progress`` (a ``progress_payload``), then ``done`` (a ``FitResult``),
    ``invalid``, ``data`` (a file by reference unreadable) or ``failed`` (a message); after
    ``done``, ``written`` (a bool) when the worker writes the model's artifact."""

    kind: str
    payload: Any = None


@dataclass
class Outcome:
    """How a worker ended: ``succeeded`` (with ``result``), ``invalid``, ``failed``, ``timeout``, ``cancelled``."""

    status: str
    result: FitResult | None = None
    message: str = ""
    written: WriteWait | None = None
    """A succeeded worker still writing the result's artifact: call it to wait (True once the
    file is on disk); ``close`` it when it is not waited for (the worker is then killed)."""


def worker_context() -> Any:
    """The multiprocessing context for workers: forkserver (preloaded) on POSIX, else spawn."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            if sys.platform != "win32" and "forkserver" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(PRELOAD)
            else:
                ctx = multiprocessing.get_context("spawn")
            _CONTEXT = ctx
        return _CONTEXT


def warm_up() -> None:
    """Start the forkserver now (it imports the numeric stack once), not at the first training."""
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        try:
            forkserver.ensure_running()
        except Exception:  # the first training will report the problem
            logger.warning("could not start the training forkserver", exc_info=True)


def exit_with_parent() -> None:
    """End this worker when the process that started it dies (kill -9 of a server included)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()  # returns when the parent's sentinel closes, i.e. when it is gone
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def limit_memory(extra_mb: float | None) -> None:
    """Cap this process's address space at its current size plus ``extra_mb`` (RLIMIT_AS)."""
    if extra_mb is None or sys.platform != "linux":
        return
    with open("/proc/self/statm") as fh:
        current = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = current + int(extra_mb * 2**20)
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def worker_main(
    task: TrainTask, messages: Any, n_jobs: int = 1, artifact: LocalArtifact | None = None
) -> None:
    """Entry point of the worker process: put progress, then one final message, on ``messages``
    (``artifact``: where to write the fitted model, see ``fit_and_evaluate``)."""
    exit_with_parent()
    serve_task(task, messages, n_jobs, artifact)


def path_main(task: TrainTask, messages: Any, estimator: Any) -> None:
    """Entry point of the process that computes a stored model's ν path and the plot data beside
    it (``plots.data.later_plot_data``) on its training rows: ``{key: data or {"error": ...}}``."""
    exit_with_parent()
    limit_memory(task.memory_limit_mb)
    try:
        later = later_plot_data(task.spec, estimator, task.X, task.y)
    except MemoryError:
        error = {"error": "the path needed more memory than BSVM_WORKER_MEMORY_MB"}
        later = dict.fromkeys(later_keys(task.spec, estimator), error)
    messages.put(WorkerMessage("done", later))


def waiting_worker_main(tasks: Any, messages: Any) -> None:
    """Entry point of a warm worker: warm itself up until its task is there (``priming``), wait
    for that one task on the pipe ``tasks`` (with where to write its model, or None), then serve
    it."""
    exit_with_parent()
    from service.training.priming import prime  # preloaded by the forkserver

    prime(tasks.poll)
    try:
        task, artifact = tasks.recv()
    except (EOFError, OSError):  # its server stopped or let it go unused
        return
    tasks.close()
    serve_task(task, messages, artifact=artifact)


def serve_task(
    task: TrainTask, messages: Any, n_jobs: int = 1, artifact: LocalArtifact | None = None
) -> None:
    """Fit ``task`` under its memory limit: progress, then one final message, on ``messages``;
    with ``artifact``, a ``written`` message (True when the model's file is on disk) after ``done``.
    """
    limit_memory(task.memory_limit_mb)
    messages.put(WorkerMessage("progress", 0.1))
    try:
        result, writing = fit_evaluate_writing(
            task,
            lambda f, d=None: messages.put(WorkerMessage("progress", progress_payload(f, d))),
            n_jobs=n_jobs,
            artifact=artifact,
        )
    except MemoryError:
        messages.put(
            WorkerMessage(
                "memory",
                f"the training needed more than its {task.memory_limit_mb:g} MiB of memory "
                "(BSVM_WORKER_MEMORY_MB)",
            )
        )
    except DataReadError as exc:  # a file by reference went away or cannot be read
        messages.put(WorkerMessage("data", str(exc)[:500]))
    except ValueError as exc:
        messages.put(WorkerMessage("invalid", str(exc)[:500]))
    except Exception as exc:
        traceback.print_exc()
        messages.put(WorkerMessage("failed", f"{type(exc).__name__}: {str(exc)[:500]}"))
    else:
        messages.put(WorkerMessage("done", result))  # the server stores it meanwhile
        if writing is not None:
            messages.put(WorkerMessage("written", writing.write()))


def _stop(process: Any) -> None:
    if process.is_alive():
        process.kill()
    process.join(timeout=10)


_START_LOCK = threading.Lock()


@contextmanager
def _main_not_reimported() -> Iterator[None]:
    """Start workers without re-running the parent's ``__main__`` in them.

    ``multiprocessing`` makes every spawned or forkserver child import the parent's main module
    (pytest, uvicorn's CLI, a bench script: up to a second per training). Worker targets are
    importable by name, so the child needs none of it: while a worker starts, ``__main__`` is a
    bare module, which ``spawn.get_preparation_data`` skips.
    """
    with _START_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


@dataclass
class StartedWorker:
    """A running worker process, its message pipe and, for a warm one, the pipe its one task
    goes down (None: the task was given at start)."""

    process: Any
    messages: Any
    tasks: Any = None

    def stop(self) -> None:
        """Kill the process (if still alive) and release its pipes."""
        _stop(self.process)
        self.close()

    def stop_soon(self) -> None:
        """``stop`` in a background thread, for a worker whose result is in: its exit (kill and
        reaping through the forkserver, 7-11 ms) is then off the training's answer."""
        threading.Thread(target=self.stop, name="worker-reaper", daemon=True).start()

    def close(self) -> None:
        """Release the message pipe and the task pipe (the process is gone or left alone)."""
        self.messages.close()
        if self.tasks is not None:
            self.tasks.close()


def start_waiting_worker() -> StartedWorker:
    """Start a warm worker: a process that waits for one task (``waiting_worker_main``)."""
    ctx = worker_context()
    receiving, sending = ctx.Pipe(duplex=False)
    widen(sending)  # a task goes in one write (``messages``)
    messages = Messages(ctx)
    process = ctx.Process(target=waiting_worker_main, args=(receiving, messages), daemon=True)
    with _main_not_reimported():
        process.start()
    receiving.close()  # the child holds its own ends
    messages.started()
    return StartedWorker(process, messages, sending)


def run_in_process(
    task: TrainTask,
    *,
    timeout_s: float,
    cancelled: threading.Event,
    on_progress: Callable[..., None] = lambda f, d=None: None,
    poll_s: float = 0.05,
    target: Callable[..., None] = worker_main,
    extra_args: tuple[Any, ...] = (),
    warm: StartedWorker | None = None,
    artifact: LocalArtifact | None = None,
) -> Outcome:
    """Run ``target(task, messages, *extra_args)`` (``worker_main``) in a fresh process, or hand
    ``task`` to the ``warm`` worker when one is given and still takes it.

    ``artifact`` (``worker_main``'s only): where the worker writes the fitted model's bytes.

    The process is killed on timeout or when ``cancelled`` is set; ``target`` must be importable
    by name and speak ``worker_main``'s messages. ``on_progress(fraction)`` is called with a
    ``detail`` dict as second argument when the fit gives one (a training by reference).
    """
    deadline = time.monotonic() + timeout_s
    worker = None
    if warm is not None:
        try:
            warm.tasks.send((task, artifact))
            worker = warm
        except (OSError, ValueError):  # it died while waiting: start a fresh one
            logger.warning("a warm training worker was gone; starting a fresh one")
            warm.stop()
    if worker is None:
        ctx = worker_context()
        messages = Messages(ctx)
        kwargs = {} if artifact is None else {"artifact": artifact}
        process = ctx.Process(
            target=target, args=(task, messages, *extra_args), kwargs=kwargs, daemon=True
        )
        with _main_not_reimported():
            process.start()
        messages.started()
        worker = StartedWorker(process, messages)
    outcome: Outcome | None = None
    try:
        outcome = follow(worker, deadline, timeout_s, cancelled, on_progress, poll_s)
        return outcome
    finally:
        if outcome is not None and outcome.status == "succeeded":
            result = outcome.result  # a ``FitResult`` from ``worker_main``; other targets' own
            if getattr(result, "artifact", None) is not None and not result.artifact_written:
                outcome.written = WriteWait(worker, deadline, poll_s)  # it still writes
            else:
                worker.stop_soon()
        else:  # a cancel, a timeout or a failure: the process is gone before the job ends
            worker.stop()


def follow(
    worker: StartedWorker,
    deadline: float,
    timeout_s: float,
    cancelled: threading.Event,
    on_progress: Callable[..., None],
    poll_s: float,
) -> Outcome:
    """Relay the worker's progress until its final message, a cancel or the deadline."""
    process, messages = worker.process, worker.messages
    while True:
        if cancelled.is_set():
            return Outcome("cancelled", message="cancelled by request")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome(
                "timeout", message=f"training exceeded the time limit of {timeout_s:g} s"
            )
        try:
            message = messages.get(timeout=min(poll_s, remaining))
        except queue_mod.Empty:
            if process.is_alive():
                continue
            try:
                message = messages.get(timeout=1.0)
            except queue_mod.Empty:
                return Outcome(
                    "failed", message=f"worker exited unexpectedly (code {process.exitcode})"
                )
        if message.kind == "progress":
            relay_progress(on_progress, message.payload)
        elif message.kind == "done":
            return Outcome("succeeded", result=message.payload)
        else:
            return Outcome(message.kind, message=str(message.payload))
