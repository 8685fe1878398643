"""Process-wide BLAS thread limit for the solvers: one cached controller, reference-counted users."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

from threadpoolctl import ThreadpoolController

Getter = Callable[[], int | None]
Setter = Callable[[int], object]
Controls = tuple[tuple[Getter, Setter], ...]

_lock = threading.Lock()
_users = 0
_restore: list[tuple[Setter, int]] = []  # (a library's setter, its count) to restore


class _Depth(threading.local):
    """How deep this thread is inside :func:`single_blas_thread`, and the per-thread counts it
    set on the way in (to restore on the way out)."""

    depth = 0
    own: tuple[tuple[Setter, int], ...] = ()


_here = _Depth()


@functools.cache
def _controller() -> ThreadpoolController:
    """One ThreadpoolController per process (discovering the BLAS libraries is slow)."""
    return ThreadpoolController()


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """The BLAS libraries' threadpoolctl controllers, found once."""
    return tuple(_controller().select(user_api="blas").lib_controllers)


def _openblas_symbol(lib: Any, name: str) -> Callable[..., Any] | None:
    """OpenBLAS's own ``name`` (with the library's prefix and suffix), for a pthreads OpenBLAS
    (one process-wide pool); None for any other library or threading layer."""
    symbol = getattr(lib, "_get_symbol", None)
    if lib.internal_api != "openblas" or getattr(lib, "threading_layer", None) == "openmp":
        return None
    return symbol(name) if symbol is not None else None


def _thread_count_getter(lib: Any) -> Getter:
    """``lib.num_threads``'s reading: OpenBLAS's own ``openblas_get_num_threads`` (ctypes, ~0.1
    µs) where threadpoolctl would call it (not OpenMP-threaded), else the property (~0.7 µs)."""
    get = _openblas_symbol(lib, "openblas_get_num_threads")
    return get if get is not None else (lambda: lib.num_threads)


def _thread_count_setter(lib: Any) -> Setter:
    """Set ``lib``'s thread count from any thread.

    For a pthreads OpenBLAS this is its own ``openblas_set_num_threads``: threadpoolctl (3.6+)
    lets only the first thread that set that process-wide count set it again and silently ignores
    the others, so from a server's request threads its ``set_num_threads`` would do nothing (or
    leave the count at one for good). The reference count here already keeps threads from
    fighting over it. Any other library goes through threadpoolctl.
    """
    set_ = _openblas_symbol(lib, "openblas_set_num_threads")
    return set_ if set_ is not None else lib.set_num_threads


def _per_thread(lib: Any) -> bool:
    """Whether ``lib``'s count is the calling thread's own (OpenBLAS on OpenMP: ``omp_set_num_threads``)."""
    return lib.internal_api == "openblas" and getattr(lib, "threading_layer", None) == "openmp"


@functools.cache
def _blas_controls() -> tuple[Controls, Controls]:
    """(reader, setter) of the process-wide libraries, and of the per-thread ones, found once."""
    shared: list[tuple[Getter, Setter]] = []
    own: list[tuple[Getter, Setter]] = []
    for lib in _blas_libraries():
        controls = (_thread_count_getter(lib), _thread_count_setter(lib))
        (own if _per_thread(lib) else shared).append(controls)
    return tuple(shared), tuple(own)


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
        shared, own = _blas_controls()
        with _lock:
            if _users == 0:
                _restore = [(set_, n) for get, set_ in shared if (n := get()) != 1]
                for set_, _ in _restore:
                    set_(1)
            _users += 1
        if own:
            here.own = tuple((set_, n) for get, set_ in own if (n := get()) != 1)
            for set_, _ in here.own:
                set_(1)
        here.depth = 1

    def __exit__(self, *exc: object) -> None:
        global _users, _restore
        here = _here
        here.depth -= 1
        if here.depth:
            return
        if here.own:
            for set_, n in here.own:
                set_(n)
            here.own = ()
        with _lock:
            _users -= 1
            if _users == 0:
                for set_, n in _restore:
                    set_(n)
                _restore = []


def single_blas_thread() -> contextlib.AbstractContextManager[None]:
    """BLAS limited to one thread while any caller is inside; safe when chains run in threads.

    The limit is process-wide, so it is reference-counted: the first caller sets it and the
    last one restores the original, whatever threads they are and whatever order they leave in
    (a pthreads OpenBLAS through its own setter, see ``_thread_count_setter``; an OpenMP one,
    whose count is per thread, is set and restored by each thread for itself). Only libraries
    not already at one thread are set and restored, without ``ThreadpoolController.limit``'s
    survey of every library: ~1 µs, not ~9, a fixed cost of every fit.
    """
    return _SingleBlasThread()


def single_blas_thread_if(condition: bool) -> contextlib.AbstractContextManager[None]:
    """:func:`single_blas_thread` when ``condition`` holds, else the library's own thread count."""
    return single_blas_thread() if condition else contextlib.nullcontext()
