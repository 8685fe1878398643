"""A worker's message pipe: messages arrive whole and in order, a worker gone reads as none."""

from __future__ import annotations

import queue
import sys
import threading

import numpy as np
import pytest

from service.training.messages import PIPE_BYTES, Messages, widen
from service.training.worker import worker_context

BIG = 300_000  # float64 values: 2.4 MB, past the widened pipe


def send_from_threads(messages: Messages) -> None:
    """Four threads put 50 numbered messages each, then one large array follows."""

    def put_all(thread: int) -> None:
        for i in range(50):
            messages.put((thread, i))

    threads = [threading.Thread(target=put_all, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages.put(np.arange(BIG, dtype=float))


def send_nothing(messages: Messages) -> None:
    """Exit without a message."""


def test_messages_from_several_threads_arrive_whole_and_in_order():
    ctx = worker_context()
    messages = Messages(ctx)
    process = ctx.Process(target=send_from_threads, args=(messages,), daemon=True)
    process.start()
    messages.started()
    try:
        got = [messages.get(timeout=60) for _ in range(200)]
        for thread in range(4):
            assert [i for t, i in got if t == thread] == list(range(50))
        np.testing.assert_array_equal(messages.get(timeout=60), np.arange(BIG, dtype=float))
    finally:
        process.join(timeout=30)
        messages.close()
    assert process.exitcode == 0


def test_a_worker_gone_reads_as_no_message():
    ctx = worker_context()
    messages = Messages(ctx)
    process = ctx.Process(target=send_nothing, args=(messages,), daemon=True)
    process.start()
    messages.started()
    process.join(timeout=30)
    for _ in range(2):  # the end of file, then again: no message, no EOFError
        with pytest.raises(queue.Empty):
            messages.get(timeout=0.01)
    messages.close()


@pytest.mark.skipif(sys.platform != "linux", reason="F_SETPIPE_SZ")
def test_a_widened_pipe_holds_a_breast_cancer_task():
    import fcntl

    reading, writing = worker_context().Pipe(duplex=False)
    try:
        assert widen(writing)
        assert fcntl.fcntl(writing.fileno(), fcntl.F_GETPIPE_SZ) >= PIPE_BYTES
    finally:
        reading.close()
        writing.close()
