"""Reading a request's body within its byte cap, with each wait for a chunk cut after a timeout.

One ``StallWatch`` per app times every wait of every body with one timer: a wait registers its
deadline, and a sweep that runs every quarter of the timeout (armed only while some wait is
open) cancels the tasks whose deadline has passed. A wait is cut between ``timeout_s`` and
``1.25 * timeout_s`` after it began. A per-wait ``call_later`` (what ``asyncio.timeout`` does)
costs ~5 µs a request, as much as the rest of reading a small body; registering costs ~1 µs.
The cancellation it makes is told apart from any other as ``asyncio.timeout`` does it.
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive

from service.errors import PayloadTooLarge, RequestTimeout, detail


def too_large(limit: int) -> PayloadTooLarge:
    """The 413 error for a body over ``limit`` bytes."""
    mib = limit / (1024 * 1024)
    return PayloadTooLarge(
        f"request body is larger than the {mib:g} MiB limit (BSVM_MAX_BODY_MB)",
        [detail("body", f"must be at most {limit} bytes")],
    )


def body_timed_out(timeout_s: float) -> RequestTimeout:
    """The 408 error for a body that sent nothing for ``timeout_s`` seconds."""
    return RequestTimeout(
        f"the request body stopped arriving for {timeout_s:g} s (BSVM_BODY_TIMEOUT_S)",
        [detail("body", "shorter than its Content-Length, or sent too slowly")],
        headers={"Connection": "close"},
    )


class StallWatch:
    """Cuts any wait for a body chunk that lasts ``timeout_s``, with one timer for all of them.

    An open wait is its task's entry in ``waits``: (deadline, the task's ``cancelling()`` count
    when the wait began). A task waits for one chunk at a time, so the task is the wait's key;
    ``fired`` holds the tasks the watch cancelled.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.period = timeout_s / 4
        self.loop: asyncio.AbstractEventLoop | None = None
        self.waits: dict[asyncio.Task[object], tuple[float, int]] = {}
        self.fired: set[asyncio.Task[object]] = set()
        self.sweep_handle: asyncio.TimerHandle | None = None

    def _sweep(self) -> None:
        """Cancel the tasks of waits past their deadline; come back while any wait is open."""
        self.sweep_handle = None
        now = self.loop.time() if self.loop is not None else 0.0
        late = [t for t, (deadline, _) in self.waits.items() if deadline <= now]
        for task in late:
            if task not in self.fired:
                self.fired.add(task)
                task.cancel()
        if self.waits and self.loop is not None:
            self.sweep_handle = self.loop.call_later(self.period, self._sweep)

    async def next(self, receive: Receive) -> Message:
        """``await receive()``, or ``RequestTimeout`` when it takes ``timeout_s``."""
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # first use, or a new loop (tests): the old one's waits are gone
            self.loop, self.waits, self.fired, self.sweep_handle = loop, {}, set(), None
        task = asyncio.current_task(loop)
        if task is None:  # not in a task: nothing to cancel, so nothing to time
            return await receive()
        cancelling = task.cancelling()
        self.waits[task] = (loop.time() + self.timeout_s, cancelling)
        if self.sweep_handle is None:
            self.sweep_handle = loop.call_later(self.period, self._sweep)
        try:
            return await receive()
        except asyncio.CancelledError:
            if task in self.fired and task.uncancel() <= cancelling:
                raise body_timed_out(self.timeout_s) from None
            raise
        finally:
            self.waits.pop(task, None)
            if self.fired:
                self.fired.discard(task)


async def read_capped_body(receive: Receive, limit: int, watch: StallWatch) -> bytes:
    """Read the whole body, counting bytes as they arrive; ``PayloadTooLarge`` past ``limit``.

    Each wait for the next chunk is cut by ``watch`` (``RequestTimeout``), so a body shorter than
    its ``Content-Length`` or a stalled upload cannot hold the request open for ever.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await watch.next(receive)
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out ``body`` once, then defers to the real one (disconnects)."""
    sent = False

    async def receive_again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again
