"""PredictGate: at most ``limit`` predicts at once, the next refused with 503, never queued."""

from __future__ import annotations

import threading

import pytest

from service.errors import Unavailable
from service.inference.limits import PredictGate


def test_the_slot_past_the_limit_is_refused_and_freed_slots_return():
    gate = PredictGate(2)
    with gate.slot(), gate.slot():
        assert gate.held == 2
        with pytest.raises(Unavailable) as refused, gate.slot():
            pass
        assert refused.value.headers == {"Retry-After": "1"}
        assert gate.held == 2  # the refused request took nothing
    assert gate.held == 0
    with gate.slot():
        assert gate.held == 1


def test_a_slot_is_released_when_the_predict_fails():
    gate = PredictGate(1)
    with pytest.raises(RuntimeError), gate.slot():
        raise RuntimeError("scoring failed")
    assert gate.held == 0


def test_threads_never_hold_more_than_the_limit():
    gate, limit, seen = PredictGate(3), 3, []
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(2000):
            try:
                with gate.slot():
                    seen.append(gate.held)
            except Unavailable:
                pass

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gate.held == 0 and 1 <= max(seen) <= limit


def test_releasing_more_than_was_taken_is_an_error():
    with pytest.raises(ValueError):
        PredictGate(1).__exit__(None, None, None)
