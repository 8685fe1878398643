"""Warm training workers: started ahead, one task each, killed on cancel, replaced after use;
and a forked worker's first fit imports nothing the forkserver has not preloaded."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from service.model_types import model_types
from service.training.executors import LocalExecutor
from service.training.tasks import TrainTask
from service.training.warm_workers import WarmWorkers
from service.training.worker import worker_context
from tests.service.slow_estimator import slow_task
from tests.service.training.test_jobs import process_gone, read_pid


def idle_count(pool: WarmWorkers, expected: int, timeout_s: float = 60.0) -> int:
    """Idle workers of ``pool`` once it reaches ``expected`` (or the timeout passes)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(pool._idle) != expected:
        time.sleep(0.02)
    return len(pool._idle)


def test_a_warm_worker_serves_one_task_and_is_replaced(tmp_path):
    executor = LocalExecutor(warm_workers=1)
    executor.warm_up()
    first = executor.warm._idle[0].process.pid
    pid_file = tmp_path / "pid"
    outcome = executor.run(
        slow_task(pid_file=str(pid_file)), timeout_s=60, cancelled=threading.Event()
    )
    assert outcome.status == "succeeded"
    assert int(pid_file.read_text()) == first  # the warm one ran it
    assert process_gone(first)  # one task per process
    assert idle_count(executor.warm, 1) == 1
    assert executor.warm._idle[0].process.pid != first
    executor.close()
    assert executor.warm._idle == []


def test_cancel_kills_a_warm_worker(tmp_path):
    executor = LocalExecutor(warm_workers=1)
    executor.warm_up()
    pid_file, cancelled = tmp_path / "pid", threading.Event()
    result = []
    thread = threading.Thread(
        target=lambda: result.append(
            executor.run(
                slow_task(seconds=120.0, pid_file=str(pid_file)),
                timeout_s=600,
                cancelled=cancelled,
            )
        )
    )
    thread.start()
    pid = read_pid(pid_file)
    cancelled.set()
    thread.join(timeout=30)
    assert result[0].status == "cancelled" and process_gone(pid)
    executor.close()


def test_a_dead_warm_worker_is_skipped(tmp_path):
    executor = LocalExecutor(warm_workers=1)
    executor.warm_up()
    dead = executor.warm._idle[0].process
    dead.kill()
    dead.join()
    outcome = executor.run(slow_task(), timeout_s=60, cancelled=threading.Event())
    assert outcome.status == "succeeded"
    executor.close()


def imported_by_first_fits(queue) -> None:
    """In a forked worker: the modules the first fit and evaluation of three types import."""
    from service.training.fitting import fit_and_evaluate

    before = set(sys.modules)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 5))
    y = (X[:, 0] > 0).astype(int)
    for name in ("kernel_svm", "lda", "em_svm", "linear_svm", "qda", "ecme_svm"):
        spec = model_types()[name]
        meta = {"name": "x", "feature_names": None, "random_state": 0, "evaluation": None,
                "preprocess": spec.preprocess}  # fmt: skip
        fit_and_evaluate(TrainTask(spec, {}, X, y, meta=meta), lambda f: None)
    queue.put(sorted(set(sys.modules) - before))


def test_the_forkserver_preloads_what_a_first_fit_imports():
    ctx = worker_context()
    queue = ctx.Queue()
    process = ctx.Process(target=imported_by_first_fits, args=(queue,))
    process.start()
    new = queue.get(timeout=120)
    process.join(timeout=30)
    assert new == []


def test_a_task_waits_for_the_warm_worker_being_started():
    pool = WarmWorkers(1)
    pool.fill()  # the forkserver is up and warm: a worker now starts in milliseconds
    first = pool.take()
    assert first is not None
    pool.refill()  # as after a training: the replacement starts in the background
    second = pool.take()  # at once: not None, the worker under way
    assert second is not None and second.process.is_alive()
    assert second.process.pid != first.process.pid
    first.stop()
    second.stop()
    empty = WarmWorkers(1)
    started = time.monotonic()
    assert empty.take() is None and time.monotonic() - started < 0.5  # no refill: no wait
    pool.close()
