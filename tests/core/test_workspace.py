"""workspace: kept buffers are reused, never shared while taken, capped, and per thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bsvm_core import workspace as ws


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    """Each test starts with none of this thread's buffers (other tests' solves leave some)."""
    monkeypatch.setattr(ws._kept, "buffers", [])


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_buffers_are_reused_from_one_workspace_to_the_next() -> None:
    with ws.workspace() as empty:
        first = empty((300, 300))
        first[...] = 1.0
        where = _address(first)
    with ws.workspace() as empty:
        again = empty((200, 300), dtype=np.float32)  # smaller: fits the same buffer
        assert _address(again) == where
        assert again.shape == (200, 300) and again.dtype == np.float32


def test_arrays_taken_together_do_not_overlap() -> None:
    with ws.workspace() as empty:
        a, b = empty((100, 100)), empty((100, 100))
        a[...] = 1.0
        b[...] = 2.0
        assert np.all(a == 1.0) and np.all(b == 2.0)
    with ws.workspace() as empty:
        with ws.workspace() as inner:
            c = inner(10_000)
        d = empty(10_000)  # the inner block gave c's buffer back: d may take it
        e = empty(10_000)
        assert _address(d) != _address(e)
        del c


def test_kept_memory_is_capped(monkeypatch) -> None:
    monkeypatch.setattr(ws, "RETAINED_MB", 1.0)
    with ws.workspace() as empty:
        empty(2**20 // 8 * 3)  # 3 MB: over the cap, dropped on leaving
        empty(2**17 // 8)  # 128 KB: kept
    assert ws.kept_bytes() <= 2**20
    assert ws.kept_bytes() >= 2**17


def test_each_thread_keeps_its_own() -> None:
    with ws.workspace() as empty:
        empty(4096)
    seen = []

    def other() -> None:
        seen.append(ws.kept_bytes())
        with ws.workspace() as empty:
            empty(8192, dtype=np.uint8)
        seen.append(ws.kept_bytes())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [0, 8192]
    assert ws.kept_bytes() >= 4096


def test_kept_buffers_stay_in_order_of_size_and_arrays_hold_theirs() -> None:
    with ws.workspace() as empty:
        arrays = [empty(k) for k in (5_000, 300, 80_000, 300, 12)]
        arrays[1][...] = 3.0
        assert all(a.base is not None and a.base.dtype == np.uint8 for a in arrays)
        assert arrays[1].flags.c_contiguous and arrays[1].flags.writeable
        taken = [a.base for a in arrays]
    sizes = [b.nbytes for b in ws._kept.buffers]
    assert sizes == sorted(sizes) and len(sizes) == 5
    # equal sizes in the order they were taken, as a stable sort of kept + taken puts them
    same = [b for b in ws._kept.buffers if b.nbytes == 300 * 8]
    assert [id(b) for b in same] == [id(taken[1]), id(taken[3])]
    with ws.workspace() as empty:  # nothing taken: nothing changes
        pass
    assert [b.nbytes for b in ws._kept.buffers] == sizes
    with ws.workspace() as empty:
        scalar = empty((), dtype=np.float32)
        assert scalar.shape == () and scalar.dtype == np.float32
        none = empty((0, 7))
        assert none.shape == (0, 7)
