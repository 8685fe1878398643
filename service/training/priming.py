"""A warm worker's own warm-up, done while it waits for its task (``worker.waiting_worker_main``).

A worker forked from the training forkserver shares the forkserver's memory copy-on-write: its
first fit writes to thousands of those pages (reference counts, caches) and faults fresh memory in
(glibc maps every allocation over its mmap threshold anew and unmaps it when freed), so it ran
5-10 ms slower than the next fit in the same process (breast cancer, kernel_svm: 1,958 page
faults against 17; the evaluation after it 323 against 3). While it waits, a warm worker:

* keeps the memory it frees (``keep_freed_memory``: glibc serves allocations up to
  ``MMAP_THRESHOLD_MB`` from its heap and trims the heap only past ``TRIM_THRESHOLD_MB``), and
  faults ``PREFAULT_MB`` of it in now (``prefault``);
* fits the model types of ``PRIMED_TYPES`` once on a tiny set and scores them, so the pages of
  their code paths are its own.

Then the first fit of breast cancer faults about 110 pages (kernel_svm), its evaluation 2. Every
step is skipped once the task is there (``ready``, also between the MiB faulted in), so a task
never waits for more than one tiny fit. Where the C library is not glibc, only the fits run. A
worker runs one task and ends: what it keeps is given back with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
import warnings
from collections.abc import Callable

import numpy as np

from service.model_types import ModelSpec, model_types
from service.training.artifact_write import artifact_bytes
from service.training.fitting import with_preprocessing
from service.training.metrics import classification_metrics

logger = logging.getLogger("service.training.priming")

MMAP_THRESHOLD_MB = 32
"""Allocations up to this come from the heap (glibc's largest allowed threshold on 64 bits)."""
TRIM_THRESHOLD_MB = 64
"""Freed memory at the top of the heap is given back to the system only past this."""
PREFAULT_MB = 8
"""Heap faulted in ahead (a 569-row kernel matrix is 2.6 MB, a 1,000-row one 8 MB)."""
PRIMED_TYPES = ("kernel_svm", "lda")
"""Model types fitted once on a tiny set: each such fit takes 1-4 ms (the others 20-110 ms, which
a task arriving meanwhile would wait for)."""
ROWS, FEATURES = 60, 4
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory() -> bool:
    """Set glibc's thresholds (see the module notes); False where the C library is not glibc
    (nothing is changed then)."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl's mallopt does nothing
    except (OSError, AttributeError):
        return False
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MB << 20)
        and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_MB << 20)
    )


def prefault(ready: Callable[[], bool], megabytes: int = PREFAULT_MB) -> int:
    """Fault ``megabytes`` of heap in, a MiB at a time while ``ready()`` is False, and free them
    (the heap keeps them once ``keep_freed_memory`` has run); the MiB faulted in."""
    blocks = []
    for _ in range(megabytes):
        if ready():
            break
        blocks.append(np.ones((1 << 20) // 8))
    return len(blocks)


def prime(ready: Callable[[], bool]) -> None:
    """Warm this worker up (see the module notes), one step at a time while ``ready()`` is False."""
    steps: list[Callable[[], object]] = []
    try:
        if keep_freed_memory():
            steps.append(lambda: prefault(ready))
    except Exception:  # a warm-up only
        logger.debug("a warm worker's memory settings failed", exc_info=True)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(ROWS, FEATURES))
    y = (X[:, 0] + 0.5 * rng.normal(size=ROWS) > 0).astype(int)
    types = model_types()
    steps += [_fit_once(types[name], X, y) for name in PRIMED_TYPES if name in types]
    for step in steps:
        if ready():
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step()
        except Exception:  # a warm-up only: the real fit reports any problem
            logger.debug("a warm worker's priming step failed", exc_info=True)


def _fit_once(spec: ModelSpec, X: np.ndarray, y: np.ndarray) -> Callable[[], object]:
    """A step fitting and scoring ``spec``'s estimator (default parameters) on ``X``, ``y``."""

    def step() -> object:
        model = with_preprocessing(spec.make_estimator({}), spec.preprocess).fit(X, y)
        artifact_bytes(model)  # the pickler's pages too: the worker dumps its model
        return classification_metrics(model, X, y)

    return step
