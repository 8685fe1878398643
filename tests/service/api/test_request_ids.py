"""Request ids read from the OS's randomness a batch at a time."""

from __future__ import annotations

import multiprocessing
import re

from service.api.request_ids import RequestIds

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def test_ids_are_32_hex_digits_and_never_repeat_across_batches() -> None:
    ids = RequestIds(batch=4)
    taken = [ids.next() for _ in range(41)]  # ten refills and one id of an eleventh
    assert all(HEX32.match(one) for one in taken)
    assert len(set(taken)) == len(taken)


def _child_ids(ids: RequestIds, pipe: multiprocessing.connection.Connection) -> None:
    pipe.send([ids.next() for _ in range(3)])


def test_a_forked_child_does_not_repeat_its_parents_next_ids() -> None:
    ids = RequestIds(batch=64)
    ids.next()  # the parent holds 63 unread ids of its batch
    fork = multiprocessing.get_context("fork")
    parent_end, child_end = fork.Pipe()
    child = fork.Process(target=_child_ids, args=(ids, child_end))
    child.start()
    from_child = parent_end.recv()
    child.join(10)
    assert child.exitcode == 0
    from_parent = [ids.next() for _ in range(3)]
    assert all(HEX32.match(one) for one in from_child)
    assert not set(from_child) & set(from_parent)
