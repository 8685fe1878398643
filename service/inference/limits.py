"""Bounds on the memory of scoring: concurrent predicts, rows per block, memory given back.

A predict's working memory is its input matrix plus what the estimator builds per row (the
kernel block against the support vectors, per-class copies of the rows, draws for intervals),
so rows are scored in blocks whose working memory stays within ``BSVM_PREDICT_MEMORY_MB``
whatever the row count; and at most ``BSVM_PREDICT_CONCURRENCY`` predicts run at once in a
process, the others get 503 with ``Retry-After`` instead of memory. After a large request the
heap's free pages are handed back to the OS (glibc ``malloc_trim``), so a burst does not leave
the process holding its peak for ever.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from service.errors import Unavailable
from service.model_types import final_estimator

FLOAT = 8
TRIM_ABOVE_BYTES = 16 * 2**20
"""Inputs larger than this give their freed memory back to the OS after the request."""

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_TRIM = getattr(_LIBC, "malloc_trim", None)


def row_bytes(estimator: Any, n_features: int) -> int:
    """Working bytes per scored row: copies of the row, kernel entries, per-class terms."""
    support = getattr(final_estimator(estimator), "support_vectors_", None)
    n_support = 0 if support is None else int(np.shape(support)[0])
    n_classes = len(getattr(estimator, "classes_", ())) or 2
    return FLOAT * (4 * n_features + 2 * n_support + n_classes * (n_features + 4))


def row_blocks(n_rows: int, per_row: int, budget_bytes: float) -> Iterator[slice]:
    """Consecutive slices of ``n_rows`` rows, each within ``budget_bytes`` (at least one row)."""
    step = max(1, int(budget_bytes // max(per_row, 1)))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def score_in_blocks(
    fn: Callable[[np.ndarray], Any], X: np.ndarray, per_row: int, budget_bytes: float
) -> np.ndarray:
    """``fn(X)`` computed block by block and stacked."""
    if X.shape[0] * max(per_row, 1) <= budget_bytes:  # one block: no slicing, nothing to stack
        return np.asarray(fn(X))
    parts = [np.asarray(fn(X[rows])) for rows in row_blocks(X.shape[0], per_row, budget_bytes)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def give_back_memory(input_bytes: int) -> None:
    """Return the heap's free pages to the OS after a large request (glibc only)."""
    if _TRIM is not None and input_bytes > TRIM_ABOVE_BYTES:
        _TRIM(0)


class PredictGate:
    """At most ``limit`` predicts at once; the next one is refused with 503, not queued.

    The free slots are tokens in a ``deque``: taking one (``pop``) and giving it back
    (``append``) are single C-level calls, atomic under the GIL, so a slot costs no lock and no
    Python-level ``Condition`` (a non-blocking ``BoundedSemaphore`` does the same through one).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free: deque[None] = deque([None] * limit)

    @property
    def held(self) -> int:
        """Slots held now."""
        return self.limit - len(self._free)

    def slot(self) -> PredictGate:
        """``with gate.slot():`` holds one slot for the block, or raises 503 (Retry-After) when
        none is free (the gate is its own context manager: no generator per predict)."""
        return self

    def __enter__(self) -> None:
        try:
            self._free.pop()
        except IndexError:
            raise Unavailable(
                f"{self.limit} predictions are running (BSVM_PREDICT_CONCURRENCY); retry shortly",
                headers={"Retry-After": "1"},
            ) from None

    def __exit__(self, *exc_info: object) -> None:
        if len(self._free) >= self.limit:
            raise ValueError("PredictGate released more slots than it gave")
        self._free.append(None)
