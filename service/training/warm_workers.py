"""Training worker processes started before they are needed, each waiting for one task.

A training's worker used to start when its job did (10-40 ms of process start on the critical
path). ``WarmWorkers`` keeps ``size`` of them forked from the training forkserver (whose modules
and first calls are warm, ``worker.PRELOAD``), each blocked on its pipe; ``take`` hands one out
and its replacement starts in the background once that training is over (in the job queue: once
it is stored and answered, ``LocalExecutor.refill_after``); a task that comes while the
replacement is starting waits for it rather than start a second process beside it. One task per
process stays: the process ends with its task, so a cancel or a timeout still kills it
(``worker.follow``). While it waits, a
worker warms its own memory up (``priming``: its first fit no longer pays thousands of
copy-on-write and fresh page faults), a step at a time, and stops as soon as its task is there.
"""

from __future__ import annotations

import logging
import threading
import time

from service.training.worker import StartedWorker, start_waiting_worker

logger = logging.getLogger("service.training.warm_workers")


FILL_WAIT_S = 1.0
"""Longest a task waits for a warm worker whose start is under way before it starts its own."""


class WarmWorkers:
    """Up to ``size`` idle worker processes, refilled in the background after each training."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[StartedWorker] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        """Notified when a worker joins ``_idle`` and when a filler ends."""
        self._filling = threading.Lock()
        self._refilling = False
        """A refill is asked for or under way (``take`` waits for its worker)."""
        self._closed = False

    def take(self, wait_s: float = FILL_WAIT_S) -> StartedWorker | None:
        """An idle live worker, or None; while a refill is under way, its worker (up to
        ``wait_s``): a replacement starts once its training is answered (``refill``), so a
        client that posts its next training at once may find it still starting, and a second
        process started beside it would only compete with it."""
        deadline = time.monotonic() + wait_s
        with self._changed:
            while True:
                while self._idle:
                    candidate = self._idle.pop(0)
                    if candidate.process.is_alive():
                        return candidate
                    candidate.close()
                remaining = deadline - time.monotonic()
                if not self._refilling or self._closed or remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def wait_ready(self, timeout_s: float) -> bool:
        """True once a worker waits idle, within ``timeout_s`` (False when none does by then)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._idle:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._changed.wait(remaining)
            return True

    def refill(self) -> None:
        """Start the missing workers in a background thread (one filler at a time)."""
        if self.size > 0 and not self._closed:
            with self._lock:
                self._refilling = True
            threading.Thread(target=self.fill, name="warm-workers", daemon=True).start()

    def fill(self) -> None:
        """Start workers until ``size`` wait (blocking; the filler already at work wins)."""
        if not self._filling.acquire(blocking=False):
            return
        try:
            while not self._closed:
                with self._lock:
                    if len(self._idle) >= self.size:
                        return
                try:
                    worker = start_waiting_worker()
                except Exception:
                    logger.warning("could not start a warm training worker", exc_info=True)
                    return
                with self._changed:
                    if self._closed:
                        worker.stop()
                        return
                    self._idle.append(worker)
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._refilling = False
                self._changed.notify_all()
            self._filling.release()

    def close(self) -> None:
        """Stop the idle workers; none is started afterwards."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for worker in idle:
            worker.stop()
