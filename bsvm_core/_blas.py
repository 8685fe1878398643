"""Process-wide BLAS thread limit for the solvers: one cached controller, reference-counted users."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_users = 0
_limiter: Any = None


@functools.cache
def _controller() -> ThreadpoolController:
    """One ThreadpoolController per process (discovering the BLAS libraries is slow)."""
    return ThreadpoolController()


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread while any caller is inside; safe when chains run in threads.

    The limit is process-wide, so it is reference-counted: the first caller sets it and the
    last one restores the original, whatever order the threads leave in.
    """
    global _users, _limiter
    with _lock:
        if _users == 0:
            _limiter = _controller().limit(limits=1, user_api="blas")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None


def single_blas_thread_if(condition: bool) -> contextlib.AbstractContextManager[None]:
    """:func:`single_blas_thread` when ``condition`` holds, else the library's own thread count."""
    return single_blas_thread() if condition else contextlib.nullcontext()
