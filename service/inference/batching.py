"""Adaptive micro-batching: concurrent single-row predicts of one model scored in one call.

A predict of one row costs mostly the estimator's fixed overhead (input validation, the call
chain), not the row: scoring 32 rows costs about what one does. With ``BSVM_PREDICT_BATCHING``
on, the request threads that score one row with the same model and the same outputs (the
``key``) meet here. The first becomes the leader: it takes the queue, stacks the rows, makes one
vectorised call and hands each waiting thread its own row of the result. Rows that come while a
batch is being scored wait for the next one, led by the first of them, so the batch size follows
the load: one row when requests come one at a time, many under load (as BentoML's adaptive
batching does, without its latency model). When the last batch held more than one row (requests
are overlapping), the leader first waits up to ``BSVM_PREDICT_BATCH_WAIT_US`` for more rows, or
until ``max_rows`` are queued; a lone request never waits.

When the vectorised call fails, each row is scored on its own, so an error reaches only the
request that caused it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

import numpy as np

MAX_BATCH_ROWS = 256
"""Most rows scored in one call."""

Scores = dict[str, np.ndarray]


class _Pending:
    """One request's row, and its result once scored."""

    __slots__ = ("X", "done", "error", "lead", "result")

    def __init__(self, X: np.ndarray) -> None:
        self.X = X
        self.done = threading.Event()
        self.lead = False
        self.result: Scores | None = None
        self.error: BaseException | None = None


def _scored(batch: list[_Pending], score: Callable[[np.ndarray], Scores]) -> None:
    """Score ``batch`` in one call (row by row if that fails); fill each result or error."""
    if len(batch) == 1:
        try:
            batch[0].result = score(batch[0].X)
        except Exception as exc:
            batch[0].error = exc
        return
    try:
        scores = score(np.vstack([item.X for item in batch]))
    except Exception:
        for item in batch:
            try:
                item.result = score(item.X)
            except Exception as exc:
                item.error = exc
        return
    for i, item in enumerate(batch):
        item.result = {name: values[i : i + 1] for name, values in scores.items()}


class MicroBatcher:
    """Batches of concurrent one-row scorings that share a key (model id and outputs)."""

    def __init__(self, wait_s: float = 0.0, max_rows: int = MAX_BATCH_ROWS) -> None:
        self.wait_s = wait_s
        self.max_rows = max_rows
        self._lock = threading.Condition()
        self._queues: dict[Hashable, list[_Pending]] = {}
        self._leading: set[Hashable] = set()
        self.batches = 0
        self.rows = 0
        self.last_rows = 0
        """Rows of the last batch (of any key): above 1, the next leader waits for more."""

    def score(self, key: Hashable, X: np.ndarray, score: Callable[[np.ndarray], Scores]) -> Scores:
        """``score(X)`` for one row ``X``, computed in a batch with other rows of ``key``.

        ``score`` must give the same answer row by row as on stacked rows (a predict does); the
        leader's ``score`` scores the whole batch.
        """
        item = _Pending(X)
        with self._lock:
            self._queues.setdefault(key, []).append(item)
            item.lead = key not in self._leading
            if item.lead:
                self._leading.add(key)
            else:
                self._lock.notify_all()
        if not item.lead:
            item.done.wait()
        if item.lead:
            self._lead(key, score)
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def _lead(self, key: Hashable, score: Callable[[np.ndarray], Scores]) -> None:
        """Collect (for up to ``wait_s``), score one batch, pass the lead to the next row."""
        batch: list[_Pending] = []
        try:
            with self._lock:
                deadline = time.monotonic() + (self.wait_s if self.last_rows > 1 else 0.0)
                queue = self._queues[key]
                while len(queue) < self.max_rows and (left := deadline - time.monotonic()) > 0:
                    self._lock.wait(left)
                batch = queue[: self.max_rows]
                del queue[: self.max_rows]
                self.batches += 1
                self.rows += len(batch)
                self.last_rows = len(batch)
            _scored(batch, score)
        finally:
            for item in batch:
                item.lead = False
                item.done.set()
            with self._lock:
                queue = self._queues[key]
                if queue:
                    queue[0].lead = True
                    queue[0].done.set()
                else:
                    del self._queues[key]
                    self._leading.discard(key)
