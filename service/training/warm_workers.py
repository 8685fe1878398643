"""Training worker processes started before they are needed, each waiting for one task.

A training's worker used to start when its job did (10-40 ms of process start on the critical
path). ``WarmWorkers`` keeps ``size`` of them forked from the training forkserver (whose modules
and first calls are warm, ``worker.PRELOAD``), each blocked on its pipe; ``take`` hands one out
then its replacement starts in the background once that training is over. One task per process stays: the process ends
with its task, so a cancel or a timeout still kills it (``worker.follow``). While it waits, a
worker warms its own memory up (``priming``: its first fit no longer pays thousands of
copy-on-write and fresh page faults), a step at a time, and stops as soon as its task is there.
"""

from __future__ import annotations

import logging
import threading

from service.training.worker import StartedWorker, start_waiting_worker

logger = logging.getLogger("service.training.warm_workers")


class WarmWorkers:
    """Up to ``size`` idle worker processes, refilled in the background after each training."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[StartedWorker] = []
        self._lock = threading.Lock()
        self._filling = threading.Lock()
        self._closed = False

    def take(self) -> StartedWorker | None:
        """An idle live worker, or None (``refill`` once its training is over, so that starting
        the replacement does not compete with the fit for a core)."""
        worker = None
        with self._lock:
            while self._idle and worker is None:
                candidate = self._idle.pop(0)
                if candidate.process.is_alive():
                    worker = candidate
                else:
                    candidate.close()
        return worker

    def refill(self) -> None:
        """Start the missing workers in a background thread (one filler at a time)."""
        if self.size > 0 and not self._closed:
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
                with self._lock:
                    if self._closed:
                        worker.stop()
                        return
                    self._idle.append(worker)
        finally:
            self._filling.release()

    def close(self) -> None:
        """Stop the idle workers; none is started afterwards."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
