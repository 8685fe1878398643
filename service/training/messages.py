"""A worker's messages to the process that started it, over one pipe (``worker.run_in_process``).

A ``multiprocessing.Queue`` hands each message to a feeder thread that the worker starts at its
first ``put``: that thread's start, and its turn at the GIL beside the fit, put 0.7-3 ms between
a warm worker's first message and its arrival (breast cancer, load 3; a bare pipe: 0.2 ms). Here
``put`` writes the pickled message itself, under a lock (an estimator's progress hook may report
from another thread). The pipes a task and its answer travel through are widened
(``widen``, Linux's ``F_SETPIPE_SZ``), so that a breast-cancer task (142 kB) or a fitted model goes
in one write and is read after one wake-up, not in 64 kB turns (0.3 ms to send instead of
0.6-3). A worker killed in the middle of a message leaves its end closed: ``get`` then reads an
end of file, which it answers as "nothing yet", as the queue did, and ``worker.follow`` finds the
process gone.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: pipes keep their size
    fcntl = None  # type: ignore[assignment]

PIPE_BYTES = 1 << 20
"""Kernel buffer asked for each pipe (Linux's default ceiling, ``/proc/sys/fs/pipe-max-size``)."""


def widen(connection: Any, size: int = PIPE_BYTES) -> bool:
    """Ask for a ``size``-byte kernel buffer on ``connection``'s pipe; False where it is refused
    (not Linux, a per-user limit reached): the pipe then works as it was."""
    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setter is None:
        return False
    try:
        fcntl.fcntl(connection.fileno(), setter, size)
    except OSError:
        return False
    return True


class Messages:
    """The worker's end (``put``) and the parent's end (``get``) of one message pipe.

    Made in the parent before the worker starts; the worker receives it with its arguments.
    The parent calls ``started`` once the worker runs (it drops its copy of the worker's end, so
    the worker's death reads as an end of file) and ``close`` when done.
    """

    def __init__(self, ctx: Any) -> None:
        self._reader, self._writer = ctx.Pipe(duplex=False)
        widen(self._writer)
        self._lock = threading.Lock()
        self._ended = False

    def __getstate__(self) -> dict[str, Any]:
        return {"_writer": self._writer}  # the worker's side only

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._reader, self._writer = None, state["_writer"]
        self._lock = threading.Lock()
        self._ended = False

    def put(self, message: Any) -> None:
        """Send ``message`` (in the worker); blocks only while the pipe is full."""
        with self._lock:
            self._writer.send(message)

    def started(self) -> None:
        """The worker holds its own end now: close this process's copy of it."""
        self._writer.close()

    def get(self, timeout: float) -> Any:
        """The next message (in the parent); ``queue.Empty`` when none comes within ``timeout`` s
        or the worker's end is closed (the caller checks whether the worker is still alive)."""
        if not self._ended:
            try:
                if self._reader.poll(timeout):
                    return self._reader.recv()
            except (EOFError, OSError):
                self._ended = True
            else:
                raise queue.Empty
        time.sleep(timeout)  # nothing more can come: pace the caller's checks of the process
        raise queue.Empty

    def close(self) -> None:
        """Release both ends held here."""
        for end in (self._reader, self._writer):
            if end is not None:
                with contextlib.suppress(OSError):
                    end.close()
