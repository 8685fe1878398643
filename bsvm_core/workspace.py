"""Large scratch arrays of the kernel solvers, kept from one solve to the next in each thread.

glibc hands a freed block of a few MB back to the OS, so the next fit's array of that size comes
back as fresh pages, and its first touch costs a page fault per 4 KB page: about 2 µs a page on
this machine, 3 ms of a 7 ms breast-cancer fit (1,200 faults; 0 with the buffers kept). The
solvers take their dense kernel matrices and kept kernel rows from :func:`workspace` instead; on
leaving it the buffers stay with the thread, at most ``RETAINED_MB`` of them, for the next solve.
Arrays from a workspace must not outlive it: solvers return fresh arrays only.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator

import numpy as np

RETAINED_MB = 48.0
"""Most memory each thread keeps between solves (the largest buffers first): digits' one-vs-one
fit keeps 35 MB (its float32 distance matrix 12 MB, the lockstep active sets' kept rows 19 MB, the
matrix fill's scratch 3 MB; at 32 MB one of them went back each fit, 1,300 page faults), breast
cancer 8 MB; a dense matrix of 1,400 rows is 16 MB. Larger fits take fresh pages, a smaller share
of their time."""

Empty = Callable[..., np.ndarray]
"""``empty(shape, dtype=np.float64)``: an uninitialised array, like ``np.empty``."""


class _Kept(threading.local):
    """This thread's kept byte buffers."""

    def __init__(self) -> None:
        self.buffers: list[np.ndarray] = []


_kept = _Kept()


def kept_bytes() -> int:
    """Bytes this thread keeps between solves."""
    return sum(b.nbytes for b in _kept.buffers)


def _retain(buffers: list[np.ndarray], limit: float) -> list[np.ndarray]:
    """The largest buffers whose total stays within ``limit`` bytes."""
    kept, total = [], 0
    for b in sorted(buffers, key=lambda b: b.nbytes, reverse=True):
        if total + b.nbytes <= limit:
            kept.append(b)
            total += b.nbytes
    return kept


@contextlib.contextmanager
def workspace() -> Iterator[Empty]:
    """Yield ``empty(shape, dtype)``: arrays on this thread's kept buffers (the smallest one large
    enough, else a new one), given back for reuse when the block ends."""
    taken: list[np.ndarray] = []

    def empty(shape: int | tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        kept, best, best_size = _kept.buffers, -1, math.inf
        for k, b in enumerate(kept):  # the smallest that fits (the first of equals)
            size = b.nbytes
            if nbytes <= size < best_size:
                best, best_size = k, size
        buffer = kept.pop(best) if best >= 0 else np.empty(max(nbytes, 1), dtype=np.uint8)
        taken.append(buffer)
        return buffer[:nbytes].view(dtype).reshape(shape)

    try:
        yield empty
    finally:
        _kept.buffers = _retain(_kept.buffers + taken, RETAINED_MB * 2**20)
