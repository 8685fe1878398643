"""Resolved model references kept in memory, with refresh-ahead and stale-if-error.

Resolved references are kept in memory for ``RESOLVE_CACHE_S`` seconds, so a busy predict asks
the database once per reference and period instead of once per request. A reference still in use
when less than ``REFRESH_AHEAD`` of its period is left is read again by one background thread
(once per reference at a time), so a busy reference never expires under its requests and none of
them waits for the database; an unused one expires as before. Every write made through
the registry forgets them all at once (``forget``), so this process sees its own deletes, new versions and
moved aliases immediately; another process (a replica) sees them within ``RESOLVE_CACHE_S``.

Stale-if-error (as HTTP's ``stale-if-error``): the last answer the database gave for each reference
(and for each model id it named) is remembered apart from that cache, with when it was given.
When the database is unreachable (``DatabaseUnavailable``), a reference whose last answer is at
most ``stale_if_error_s`` past its period is answered from it instead; that answer is then kept
for one period, so the requests of a busy reference do not each try the database again, and the
background read keeps trying it. Each request so answered is noted ``stale`` on its access line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from service.errors import DatabaseUnavailable, NotFound
from service.logs import note_request

RESOLVE_CACHE_S = 0.25
"""How long a resolved reference is reused: the bound on how late a replica sees another's write."""
REFRESH_AHEAD = 0.5
"""Fraction of the period left at which a reference in use is read again in the background."""
RESOLVE_CACHE_SIZE = 4096


class ReferenceCache:
    """Model ids of references as ``read`` (the database) gave them, kept for a period."""

    def __init__(
        self,
        read: Callable[[str, str], str],
        resolve_cache_s: float = RESOLVE_CACHE_S,
        stale_if_error_s: float = 0.0,
    ) -> None:
        self.read = read
        self.resolve_cache_s = resolve_cache_s
        self.stale_if_error_s = stale_if_error_s
        self._resolved: dict[str, tuple[str, float, bool]] = {}  # ref: (id, expiry, stale)
        self._answers: dict[str, tuple[str, float]] = {}  # ref or id: (id, when read)
        self._generation = 0  # bumped by every write; a read begun before it is not kept
        self._lock = threading.Lock()
        self._refreshing: set[str] = set()
        self._refresher: ThreadPoolExecutor | None = None

    def forget(self) -> None:
        """Drop every kept reference (a write may have moved any of them)."""
        with self._lock:
            self._generation += 1
            self._resolved.clear()

    def drop_answers_of(self, model_id: str) -> None:
        """Forget every last answer naming ``model_id`` (deleted: no stale answer may name it)."""
        with self._lock:
            for key in [k for k, (found, _) in self._answers.items() if found == model_id]:
                del self._answers[key]

    def resolve(self, ref: str, field: str = "model") -> str:
        """Model id of ``ref``, kept for ``resolve_cache_s`` seconds (see the module docstring);
        errors are not kept."""
        hit = self._resolved.get(ref)
        now = time.monotonic()
        if hit is not None and hit[1] > now:
            self._refresh_if_due(ref, field, hit[1] - now)
            if hit[2]:
                note_request("stale", True)
            return hit[0]
        try:
            return self._read_and_keep(ref, field, now)
        except DatabaseUnavailable:
            model_id = self._keep_stale(ref, now)
            if model_id is None:
                raise
            note_request("stale", True)
            return model_id

    def resolved(self, ref: str) -> str | None:
        """The model id of ``ref`` if it is resolved in memory and still fresh, else ``None``
        (a stale answer noted on the request's line, as by ``resolve``)."""
        hit = self._resolved.get(ref)
        if hit is None:
            return None
        left = hit[1] - time.monotonic()
        if left <= 0:
            return None
        if left < self.resolve_cache_s * REFRESH_AHEAD:  # (``_refresh_if_due``'s first test)
            self._refresh_if_due(ref, "model", left)
        if hit[2]:  # answered from it as from ``resolve``: the request's line says so
            note_request("stale", True)
        return hit[0]

    def _keep_stale(self, ref: str, now: float) -> str | None:
        """The last answer for ``ref`` while it is within ``stale_if_error_s`` past its period,
        kept for one more period (marked stale); None when there is none."""
        answer = self._answers.get(ref)
        if answer is None:
            return None
        model_id, read_at = answer
        until = read_at + self.resolve_cache_s + self.stale_if_error_s
        if now >= until:
            return None
        with self._lock:
            self._resolved[ref] = (model_id, min(now + self.resolve_cache_s, until), True)
        return model_id

    def _read_and_keep(self, ref: str, field: str, now: float) -> str:
        """``ref`` read from the database and kept, unless a write raced the read."""
        generation = self._generation
        model_id = self.read(ref, field)
        with self._lock:
            if generation == self._generation:
                if len(self._resolved) >= RESOLVE_CACHE_SIZE:
                    self._resolved.clear()
                self._resolved[ref] = (model_id, now + self.resolve_cache_s, False)
                self._remember(ref, model_id, now)
        return model_id

    def _remember(self, ref: str, model_id: str, now: float) -> None:
        """Note the database's answer for ``ref`` (and that ``model_id`` exists); under the lock."""
        if self.stale_if_error_s <= 0:
            return
        for key in (ref, model_id):
            self._answers.pop(key, None)  # re-inserted last: the oldest answers go first
            self._answers[key] = (model_id, now)
        while len(self._answers) > RESOLVE_CACHE_SIZE:
            self._answers.pop(next(iter(self._answers)))

    def _refresh_if_due(self, ref: str, field: str, left: float) -> None:
        """Read ``ref`` again in the background when less than ``REFRESH_AHEAD`` of its period is
        left, once at a time per reference."""
        if left >= self.resolve_cache_s * REFRESH_AHEAD or ref in self._refreshing:
            return
        with self._lock:
            if ref in self._refreshing:
                return
            self._refreshing.add(ref)
            if self._refresher is None:
                self._refresher = ThreadPoolExecutor(1, thread_name_prefix="bsvm-resolve")
        self._refresher.submit(self._refresh, ref, field)

    def _refresh(self, ref: str, field: str) -> None:
        """One background read of ``ref``; a reference now gone is forgotten, other errors leave
        the kept answer to expire as it would."""
        try:
            self._read_and_keep(ref, field, time.monotonic())
        except NotFound:
            with self._lock:
                self._resolved.pop(ref, None)
                self._answers.pop(ref, None)
        except DatabaseUnavailable:  # keep answering from the last answer while it may be used
            self._keep_stale(ref, time.monotonic())
        except Exception:  # anything else: the next request asks the database itself
            pass
        finally:
            self._refreshing.discard(ref)
