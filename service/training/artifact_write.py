"""A fitted model's artifact written by its training worker, while the server stores its row.

When the artifact store is a local folder, the server hands the worker the place of the model's
file (``repository.local_files.LocalArtifact``, under a model id the server chose). Once the model
is fitted and measured, the worker takes the estimator's joblib bytes (the bytes the server signs
and stores), sends its result with them (``done``), then writes the file (temporary file, fsync,
link, fsync of the folder) and sends ``written`` once it is named and on disk. Meanwhile the
server signs the bytes and runs the registry's statements; its transaction waits for ``written``
(``WriteWait``) before it commits, so a row still never names a file that is not on disk. The
flushes thus overlap the result's trip and the row's statements, and leave the server's process
(where the file's thread waited on the GIL beside the row's statements, 4-20 ms on a busy
machine). Should the worker fail to write, or die first, the server puts the bytes itself.

The write comes after the evaluation, not beside it: a thread writing during the evaluation took
the GIL from it at each system call (2-3 ms more of evaluation for a breast-cancer fit), while
the server's statements (2-3 ms) cover a quiet disk's flushes (about 1 ms) anyway.
"""

from __future__ import annotations

import io
import logging
import queue
import threading
import time
from typing import Any

import joblib

from service.repository.local_files import LocalArtifact

logger = logging.getLogger("service.training.artifact_write")


def artifact_bytes(estimator: Any) -> bytes:
    """The estimator's joblib bytes (``ModelStore.prepare``'s serialisation)."""
    buffer = io.BytesIO()
    joblib.dump(estimator, buffer)
    return buffer.getvalue()


class ArtifactWrite:
    """The bytes of ``estimator`` (taken now), to be written to ``slot`` (``write``)."""

    def __init__(self, slot: LocalArtifact, estimator: Any) -> None:
        self.slot = slot
        self.data = artifact_bytes(estimator)

    def write(self) -> bool:
        """Write the bytes; True when the file is on disk under its name (False: the server
        writes them, and the log says why)."""
        try:
            self.slot.write(self.data)
        except Exception as exc:
            logger.warning(
                "the worker could not write the artifact of %s (%r); the server writes it",
                self.slot.model_id,
                exc,
            )
            return False
        return True


class WriteWait:
    """The server's side of a succeeded worker still writing its artifact: ``__call__`` waits
    for its ``written`` message (until ``deadline``, ``time.monotonic``); the answer is kept, so
    it may be asked again (a save's retries). ``close`` lets the worker go."""

    def __init__(self, worker: Any, deadline: float, poll_s: float = 0.05) -> None:
        self._worker = worker
        self._deadline = deadline
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._written: bool | None = None
        self._released = False

    def __call__(self) -> bool:
        """True once the worker's file is on disk; False when it failed, died or ran out of
        time (the worker is stopped then)."""
        with self._lock:
            if self._written is None:
                self._written = self._wait()
            return self._written

    def _wait(self) -> bool:
        worker = self._worker
        try:
            while (remaining := self._deadline - time.monotonic()) > 0:
                try:
                    message = worker.messages.get(timeout=min(self._poll_s, remaining))
                except queue.Empty:
                    if worker.process.is_alive():
                        continue
                    try:  # its last message may have come just before it ended
                        message = worker.messages.get(timeout=0.0)
                    except queue.Empty:
                        break
                if message.kind == "written":  # the worker ends; ``close`` reaps it
                    return bool(message.payload)
        except BaseException:
            worker.stop()
            raise
        worker.stop()
        return False

    def close(self) -> None:
        """Let the worker go: reaped in the background once its write was waited for (the job
        has ended: its exit is off the answer); else killed now (nobody stores its bytes)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            if self._written is None:
                self._written = False
                self._worker.stop()
            else:
                self._worker.stop_soon()
