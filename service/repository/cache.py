"""A thread-safe LRU of loaded estimators, bounded in bytes.

Each entry's size is its artifact's byte length (known from the record), a good proxy of the
unpickled size. An entry may carry a companion: what a layer above made of the estimator once
(the scoring layer's ``Servable``), kept and dropped with it. Artifacts are write-once under their id, so an entry never goes stale; a deleted
model is dropped with :meth:`ModelCache.discard`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class ModelCache:
    """Least-recently-used estimators whose sizes add up to at most ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._companions: dict[str, Any] = {}
        self._bytes = 0

    def get(self, model_id: str) -> Any | None:
        """The cached estimator of ``model_id`` (now most recently used), or None."""
        with self._lock:
            entry = self._entries.get(model_id)
            if entry is None:
                return None
            self._entries.move_to_end(model_id)
            return entry[0]

    def companion(self, model_id: str, estimator: Any) -> Any | None:
        """The companion kept with ``model_id``'s entry while it holds ``estimator``, or None."""
        found = self._companions.get(model_id)
        if found is None or found[0] is not estimator:
            return None
        return found[1]

    def cached_companion(self, model_id: str) -> Any | None:
        """The companion kept with ``model_id``'s cached estimator (now most recently used), or
        None: ``get`` then ``companion``, in one call."""
        with self._lock:
            entry = self._entries.get(model_id)
            if entry is None:
                return None
            self._entries.move_to_end(model_id)
        found = self._companions.get(model_id)
        return None if found is None or found[0] is not entry[0] else found[1]

    def keep_companion(self, model_id: str, estimator: Any, companion: Any) -> None:
        """Keep ``companion`` with ``model_id``'s entry if it holds ``estimator`` (else nothing)."""
        with self._lock:
            entry = self._entries.get(model_id)
            if entry is not None and entry[0] is estimator:
                self._companions[model_id] = (estimator, companion)

    def put(self, model_id: str, estimator: Any, nbytes: int) -> bool:
        """Keep ``estimator`` as ``nbytes`` large, evicting the oldest; False when it cannot fit."""
        if nbytes < 0:
            raise ValueError("nbytes must be >= 0")
        with self._lock:
            self._pop(model_id)
            if nbytes > self.max_bytes:
                return False
            while self._bytes + nbytes > self.max_bytes:  # evict first: the sum never overshoots
                self._pop(next(iter(self._entries)))
            self._entries[model_id] = (estimator, nbytes)
            self._bytes += nbytes
            return True

    def discard(self, model_id: str) -> None:
        """Forget ``model_id`` if it is cached."""
        with self._lock:
            self._pop(model_id)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._companions.clear()
            self._bytes = 0

    def _pop(self, model_id: str) -> None:
        """Remove one entry and its bytes; the caller holds the lock."""
        entry = self._entries.pop(model_id, None)
        self._companions.pop(model_id, None)
        if entry is not None:
            self._bytes -= entry[1]

    def __contains__(self, model_id: object) -> bool:
        """True when ``model_id`` is cached (does not touch its recency)."""
        with self._lock:
            return model_id in self._entries

    @property
    def bytes_used(self) -> int:
        """Sum of the sizes of the cached entries."""
        return self._bytes

    @property
    def count(self) -> int:
        """Number of cached entries."""
        return len(self._entries)
