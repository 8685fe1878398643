"""Where a training runs: ``LocalExecutor`` (a worker process here) behind one small protocol."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from service.settings import Settings
from service.training.worker import Outcome, TrainTask, run_in_process, warm_up


class Executor(Protocol):
    """Runs one task to an ``Outcome``; honours the timeout and the cancel event."""

    def run(
        self,
        task: TrainTask,
        *,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[[float], None],
    ) -> Outcome:
        """Fit ``task``; kill the work on timeout or when ``cancelled`` is set."""
        ...

    def close(self) -> None:
        """Release what the executor holds."""
        ...


class LocalExecutor:
    """A fresh worker process per training (forkserver), killed on timeout or cancel."""

    def __init__(self) -> None:
        threading.Thread(target=warm_up, name="train-warm-up", daemon=True).start()

    def run(
        self,
        task: TrainTask,
        *,
        timeout_s: float,
        cancelled: threading.Event,
        on_progress: Callable[[float], None],
    ) -> Outcome:
        """Fit ``task`` in a worker process."""
        return run_in_process(
            task, timeout_s=timeout_s, cancelled=cancelled, on_progress=on_progress
        )

    def close(self) -> None:
        """Nothing to release."""


def make_executor(settings: Settings) -> Executor:
    """The executor the settings ask for."""
    return LocalExecutor()
