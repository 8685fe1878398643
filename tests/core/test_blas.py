"""``single_blas_thread``: one BLAS thread inside (nested or not), the original counts restored."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from bsvm_core._blas import single_blas_thread


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize("outside", [1, 2])
def test_one_thread_inside_and_the_original_restored(outside: int) -> None:
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS loaded
    with threadpool_limits(limits=outside, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == outside for n in before)
        with single_blas_thread():
            assert all(n == 1 for n in _blas_threads())
            with single_blas_thread():
                assert all(n == 1 for n in _blas_threads())
            assert all(n == 1 for n in _blas_threads())  # the outer user still holds it
        assert _blas_threads() == before


def test_the_counts_are_restored_after_an_exception_inside() -> None:
    np.ones((2, 2)) @ np.ones((2, 2))
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with pytest.raises(RuntimeError), single_blas_thread(), single_blas_thread():
            assert all(n == 1 for n in _blas_threads())
            raise RuntimeError("inside")
        assert _blas_threads() == before
        with single_blas_thread():  # this thread's depth went back to 0: the limit is set again
            assert all(n == 1 for n in _blas_threads())
        assert _blas_threads() == before


def test_threads_inside_together_keep_the_limit_and_the_counts_come_back() -> None:
    """Threads entering (nested) while this one is inside, leaving before it."""
    import threading

    np.ones((2, 2)) @ np.ones((2, 2))
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        entered, release = threading.Barrier(3), threading.Event()
        seen: list[list[int]] = []

        def user() -> None:
            with single_blas_thread(), single_blas_thread():  # nested in each thread
                entered.wait()
                release.wait()
                seen.append(_blas_threads())

        with single_blas_thread():
            threads = [threading.Thread(target=user) for _ in range(2)]
            for t in threads:
                t.start()
            entered.wait()
            assert all(n == 1 for n in _blas_threads())
            release.set()
            for t in threads:
                t.join()
            assert all(n == 1 for n in _blas_threads())  # still held by this thread
            with single_blas_thread():  # nested here too
                assert all(n == 1 for n in _blas_threads())
            assert all(n == 1 for n in _blas_threads())
        assert _blas_threads() == before
        assert seen == [[1] * len(before)] * 2
        with single_blas_thread():  # every thread's depth back at 0: set again
            assert all(n == 1 for n in _blas_threads())
        assert _blas_threads() == before


def test_request_threads_get_one_thread_while_another_thread_holds_threadpoolctl() -> None:
    """A server's request threads: each one's use sets one thread and restores the count, though
    another live thread is threadpoolctl's controlling thread (threadpoolctl 3.6+ would silently
    ignore their ``set_num_threads``: the limit did nothing there, or stayed on for good)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    np.ones((2, 2)) @ np.ones((2, 2))
    with threadpool_limits(limits=2, user_api="blas"):  # this thread now controls threadpoolctl
        before = _blas_threads()
        assert all(n == 2 for n in before)

        one_at_a_time, names = threading.Lock(), set()

        def request(_: int) -> tuple[list[int], list[int]]:
            with one_at_a_time:
                names.add(threading.current_thread().name)
                with single_blas_thread():
                    inside = _blas_threads()
                return inside, _blas_threads()

        with ThreadPoolExecutor(2) as pool:  # live threads, one request after another
            seen = list(pool.map(request, range(6)))
        assert len(names) == 2
        assert seen == [([1] * len(before), before)] * 6
        assert _blas_threads() == before


def test_threads_leaving_in_any_order_restore_the_count_from_any_thread() -> None:
    """The last thread out restores the count, whichever thread set it."""
    import threading

    np.ones((2, 2)) @ np.ones((2, 2))
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        seen: dict[str, list[int]] = {}

        def first() -> None:
            with single_blas_thread():
                first_in.set()
                second_in.wait()
            first_out.set()

        def second() -> None:
            first_in.wait()
            with single_blas_thread():
                second_in.set()
                first_out.wait()
                seen["after the first left"] = _blas_threads()
            seen["after both"] = _blas_threads()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == {"after the first left": [1] * len(before), "after both": before}
        assert _blas_threads() == before


def test_a_per_thread_library_is_set_and_restored_by_each_thread_for_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An OpenMP-threaded OpenBLAS (``omp_set_num_threads``: the calling thread's own count),
    faked: each thread sets its own count to one inside and restores its own on the way out,
    while another thread is still inside."""
    import threading

    from bsvm_core import _blas

    counts = threading.local()

    def get() -> int:
        return getattr(counts, "n", 4)

    def set_(n: int) -> None:
        counts.n = n

    monkeypatch.setattr(_blas, "_blas_controls", lambda: ((), ((get, set_),)))
    inside, leave = threading.Barrier(2), threading.Event()
    seen: dict[str, list[int]] = {}

    def user(name: str, start: int) -> None:
        counts.n = start
        with single_blas_thread():
            seen[name] = [get()]
            inside.wait()
            if name == "second":
                leave.wait()
        seen[name].append(get())
        if name == "first":
            leave.set()

    threads = [
        threading.Thread(target=user, args=("first", 3)),
        threading.Thread(target=user, args=("second", 5)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"first": [1, 3], "second": [1, 5]}
