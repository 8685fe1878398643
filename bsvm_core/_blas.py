"""Process-wide BLAS thread limit for the solvers: one cached controller, reference-counted users."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_users = 0
_restore: list[tuple[Any, int]] = []  # (BLAS library, its thread count) to restore on the way out


class _Depth(threading.local):
    """How deep this thread is inside :func:`single_blas_thread`."""

    depth = 0


_here = _Depth()


@functools.cache
def _controller() -> ThreadpoolController:
    """One ThreadpoolController per process (discovering the BLAS libraries is slow)."""
    return ThreadpoolController()


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """The BLAS libraries' threadpoolctl controllers, found once."""
    return tuple(_controller().select(user_api="blas").lib_controllers)


def _thread_count_getter(lib: Any) -> Callable[[], int | None]:
    """``lib.num_threads``'s reading: OpenBLAS's own ``openblas_get_num_threads`` (ctypes, ~0.1
    µs) where threadpoolctl would call it (not OpenMP-threaded), else the property (~0.7 µs)."""
    symbol = getattr(lib, "_get_symbol", None)
    if lib.internal_api == "openblas" and getattr(lib, "threading_layer", None) != "openmp":
        get = symbol("openblas_get_num_threads") if symbol is not None else None
        if get is not None:
            return get
    return lambda: lib.num_threads


@functools.cache
def _blas_thread_counts() -> tuple[tuple[Any, Callable[[], int | None]], ...]:
    """(library, its thread-count reader) of every BLAS library, found once."""
    return tuple((lib, _thread_count_getter(lib)) for lib in _blas_libraries())


class _SingleBlasThread:
    """The context of :func:`single_blas_thread` (a class, not a generator: ~1.5 µs less a use).

    A thread already inside keeps the limit on by its outer use, which cannot end first: an inner
    use only counts its depth (no lock)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _users, _restore
        here = _here
        if here.depth:
            here.depth += 1
            return
        with _lock:
            if _users == 0:
                _restore = [(lib, n) for lib, get in _blas_thread_counts() if (n := get()) != 1]
                for lib, _ in _restore:
                    lib.set_num_threads(1)
            _users += 1
        here.depth = 1

    def __exit__(self, *exc: object) -> None:
        global _users, _restore
        here = _here
        here.depth -= 1
        if here.depth:
            return
        with _lock:
            _users -= 1
            if _users == 0:
                for lib, n in _restore:
                    lib.set_num_threads(n)
                _restore = []


def single_blas_thread() -> contextlib.AbstractContextManager[None]:
    """BLAS limited to one thread while any caller is inside; safe when chains run in threads.

    The limit is process-wide, so it is reference-counted: the first caller sets it and the
    last one restores the original, whatever order the threads leave in. Only libraries not
    already at one thread are set and restored, through their controllers directly (what
    ``ThreadpoolController.limit`` does, without its survey of every library: ~1 µs, not ~9, a
    fixed cost of every fit).
    """
    return _SingleBlasThread()


def single_blas_thread_if(condition: bool) -> contextlib.AbstractContextManager[None]:
    """:func:`single_blas_thread` when ``condition`` holds, else the library's own thread count."""
    return single_blas_thread() if condition else contextlib.nullcontext()
