"""Large scratch arrays of the kernel solvers, kept from one solve to the next in each thread.

glibc hands a freed block of a few MB back to the OS, so the next fit's array of that size comes
back as fresh pages, and its first touch costs a page fault per 4 KB page: about 2 µs a page on
this machine, 3 ms of a 7 ms breast-cancer fit (1,200 faults; 0 with the buffers kept). The
solvers take their dense kernel matrices and kept kernel rows from :func:`workspace` instead; on
leaving it the buffers stay with the thread, at most ``RETAINED_MB`` of them, for the next solve.
Arrays from a workspace must not outlive it: solvers return fresh arrays only.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import operator
import threading
from collections.abc import Callable

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


_NBYTES = operator.attrgetter("nbytes")

_ITEMSIZE: dict[object, int] = {np.float64: 8, np.float32: 4, np.uint8: 1, np.bool_: 1}
"""Item sizes of the usual dtypes (``np.dtype(t).itemsize`` costs ~0.3 µs a call)."""


def _retain(buffers: list[np.ndarray], limit: float) -> list[np.ndarray]:
    """The largest buffers whose total stays within ``limit`` bytes, smallest first."""
    if sum(map(_NBYTES, buffers)) <= limit:  # the usual case: all of them
        return sorted(buffers, key=_NBYTES)
    kept, total = [], 0
    for b in sorted(buffers, key=_NBYTES, reverse=True):
        if total + b.nbytes <= limit:
            kept.append(b)
            total += b.nbytes
    kept.reverse()
    return kept


class _Workspace:
    """The context of :func:`workspace`: its ``empty`` and the buffers it has taken."""

    __slots__ = ("taken",)

    def __enter__(self) -> Empty:
        self.taken: list[np.ndarray] = []
        return self.empty

    def empty(self, shape: int | tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        """An array on the smallest kept buffer large enough (the first of equals), else on a
        new one."""
        if isinstance(shape, int):
            size, shape = shape, (shape,)
        else:
            shape = tuple(shape)
            size = math.prod(shape)
        itemsize = _ITEMSIZE.get(dtype)
        nbytes = size * (np.dtype(dtype).itemsize if itemsize is None else itemsize)
        kept = _kept.buffers  # smallest first (``_retain``): the first that fits is the smallest
        k = bisect.bisect_left(kept, nbytes, key=_NBYTES)
        fits = k < len(kept) and kept[k].nbytes >= nbytes  # (a list set unsorted: a new one)
        buffer = kept.pop(k) if fits else np.empty(max(nbytes, 1), dtype=np.uint8)
        self.taken.append(buffer)
        # the buffer's first bytes as the array (one constructor: ~0.4 µs, slice, view and
        # reshape ~1.1 µs); its base is the buffer
        return np.ndarray(shape, dtype, buffer)

    def __exit__(self, *exc: object) -> None:
        """The taken buffers back among the kept ones, in order of size (after equals, as the
        stable sort of ``_retain`` puts them), then ``_retain``'s cap when they exceed it."""
        taken = self.taken
        if not taken:
            return
        kept = _kept.buffers
        for buffer in taken:
            bisect.insort(kept, buffer, key=_NBYTES)
        if sum(map(_NBYTES, kept)) > RETAINED_MB * 2**20:
            _kept.buffers = _retain(kept, RETAINED_MB * 2**20)


def workspace() -> contextlib.AbstractContextManager[Empty]:
    """A context yielding ``empty(shape, dtype)``: arrays on this thread's kept buffers (the
    smallest one large enough, else a new one), given back for reuse when the block ends (a
    class, not a generator: ~1.5 µs less a use, several uses a fit)."""
    return _Workspace()
