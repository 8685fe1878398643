"""Jobs that are not trainings (``batch_predict``): run by a ``JobRunner`` of their kind.

They share the jobs table, the leases, progress and cancel with trainings: the queue claims them
alike and runs each in a thread of its own, which calls ``run_other``. The runner's result ends
the job ``succeeded``; the ``ApiError`` it raises ends it ``failed`` (``cancelled`` for a
cancel); a job taken over by another process is left to its new owner.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from service.errors import ApiError, TrainingCancelled, TrainingFailed
from service.repository.jobs import JobStore
from service.training.finishing import JobFinisher, Running

logger = logging.getLogger("service.training.queue")

JobRunner = Callable[[str, bytes, threading.Event, Callable[..., None]], dict[str, Any]]
"""Runs a job of a kind other than ``train``: ``(job_id, task bytes, cancelled, on_progress)``
→ the job's result (JSON-able); raises an ``ApiError`` (``TrainingCancelled`` once cancelled).
``on_progress(fraction, detail=None)``; ``detail`` is a ``ProgressDetail`` as a dict."""


def run_other(
    running: Running,
    runner: JobRunner,
    data: bytes,
    kind: str,
    on_progress: Callable[..., None],
    finisher: JobFinisher,
    job_store: JobStore,
) -> None:
    """Run one claimed job of ``kind`` with its runner and end its row (module docstring)."""
    job_id = running.job_id
    try:
        try:
            result = runner(job_id, data, running.cancel, on_progress)
        except TrainingCancelled as exc:
            if not running.lost:
                finisher.end(running, "cancelled", exc)
            return
        except ApiError as exc:
            if not running.lost:
                finisher.end(running, "failed", exc)
            return
        except Exception:
            logger.exception("%s job %s failed", kind, job_id)
            if not running.lost:
                finisher.end(
                    running, "failed", TrainingFailed(f"the {kind} job failed; see the log")
                )
            return
        if running.lost:
            logger.warning("job %s was taken over by another process; result dropped", job_id)
            return
        job_store.finish_if(job_id, "running", "succeeded", result=result, detail=running.detail)
    except Exception:
        logger.exception("job %s could not be concluded", job_id)
