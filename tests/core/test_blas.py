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
    """Threads entering (nested) while this one is inside, leaving before it. (threadpoolctl 3.8
    lets only the thread that set OpenBLAS's count first set it again, so this thread sets and
    restores it.)"""
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
