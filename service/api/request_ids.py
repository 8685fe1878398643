"""Fresh request ids: 32 hex digits of the OS's randomness each, read a batch at a time.

``os.urandom`` is one ``getrandom`` system call, and CPython lets go of the GIL around it: on a
server whose other threads (dispatcher, thread pool) hold the GIL now and then, taking it back
cost 10-20 µs of a 100 µs predict. One call here reads the randomness of ``BATCH`` ids; an id is
taken by ``next`` on a list iterator, which is atomic under the GIL (no lock), and a forked child
starts a batch of its own, so two processes never hand out the same ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

BATCH = 256
"""Ids per ``getrandom`` call (4 KiB of randomness)."""

ID_BYTES = 16


class RequestIds:
    """An endless supply of unguessable ids (as a uuid4's hex, at a tenth of its cost)."""

    def __init__(self, batch: int = BATCH) -> None:
        self.batch = batch
        self._ids: Iterator[str] = iter(())
        os.register_at_fork(after_in_child=self.forget)

    def forget(self) -> None:
        """Drop the ids read so far (a forked child must not repeat its parent's)."""
        self._ids = iter(())

    def next(self) -> str:
        """A fresh id: 32 lower-case hex digits."""
        found = next(self._ids, None)
        if found is None:
            raw = os.urandom(ID_BYTES * self.batch).hex()
            width = 2 * ID_BYTES
            ids = iter([raw[i : i + width] for i in range(0, len(raw), width)])
            found, self._ids = next(ids), ids
        return found


fresh_ids = RequestIds()
"""The process's supply."""
