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
