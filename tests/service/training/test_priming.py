"""A warm worker warms itself up while it waits, one step at a time, and stops once its task is
there; the memory it frees stays faulted in."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest

from service.training import priming
from service.training.worker import worker_context


def recorded_steps(monkeypatch) -> list[str]:
    """Replace every priming step by one that notes its name; the list of names run."""
    ran: list[str] = []
    monkeypatch.setattr(priming, "keep_freed_memory", lambda: ran.append("memory") or True)
    monkeypatch.setattr(priming, "prefault", lambda ready: ran.append("prefault"))
    monkeypatch.setattr(
        priming, "_fit_once", lambda spec, X, y: lambda: ran.append(spec.model_type)
    )
    return ran


def test_prime_runs_every_step_while_no_task_is_there(monkeypatch):
    ran = recorded_steps(monkeypatch)
    priming.prime(lambda: False)
    assert ran == ["memory", "prefault", *priming.PRIMED_TYPES]


def test_prime_only_sets_memory_up_once_the_task_is_there(monkeypatch):
    ran = recorded_steps(monkeypatch)
    priming.prime(lambda: True)
    assert ran == ["memory"]


def test_prime_stops_at_the_step_after_the_task_came(monkeypatch):
    ran = recorded_steps(monkeypatch)
    priming.prime(lambda: len(ran) >= 3)
    assert ran == ["memory", "prefault", priming.PRIMED_TYPES[0]]


def test_prefault_stops_between_mebibytes():
    calls = []
    assert priming.prefault(lambda: calls.append(1) or len(calls) > 3, megabytes=8) == 3


def test_without_glibc_only_the_fits_run(monkeypatch):
    ran = recorded_steps(monkeypatch)

    def broken() -> None:
        raise OSError("no libc")

    monkeypatch.setattr(priming, "keep_freed_memory", broken)
    priming.prime(lambda: False)
    assert ran == list(priming.PRIMED_TYPES)


def test_a_failing_fit_does_not_stop_the_others(monkeypatch):
    ran = recorded_steps(monkeypatch)
    first = priming.PRIMED_TYPES[0]

    def fit_once(spec, X, y):
        if spec.model_type == first:
            return lambda: 1 / 0
        return lambda: ran.append(spec.model_type)

    monkeypatch.setattr(priming, "_fit_once", fit_once)
    priming.prime(lambda: False)
    assert ran == ["memory", "prefault", *priming.PRIMED_TYPES[1:]]


def faults_of_allocations(keep: bool, queue) -> None:
    """In a forked worker: page faults of allocating and freeing 2.6 MB three times."""
    kept = priming.keep_freed_memory() if keep else False
    if kept:
        priming.prefault(lambda: False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        block = np.ones(2_600_000 // 8)
        del block
    queue.put((kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_freed_memory_is_kept_faulted_in():
    ctx = worker_context()
    faults = {}
    for keep in (False, True):
        queue = ctx.Queue()
        process = ctx.Process(target=faults_of_allocations, args=(keep, queue))
        process.start()
        kept, faults[keep] = queue.get(timeout=120)
        process.join(timeout=30)
        if keep and not kept:
            pytest.skip("not glibc")
    # without: the first allocation at least is mapped and faulted in (about 635 pages)
    assert faults[False] > 500
    assert faults[True] < 100
