"""A stored model's ν path, computed after its training job ended (its answer does not wait).

The path and the plot data computed beside it (``plots.data.later_plot_data``) run in a worker
process on the task's rows and go into the model's record (``plot_data.path``,
``plot_data.compare``). A model trained on rows by reference gets an error entry instead: its
rows are not held in memory, and the path would refit on all of them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from service.plots.data import NO_PATH_BY_REFERENCE, later_keys
from service.repository.jobs import JobStore
from service.settings import Settings
from service.training.tasks import TrainTask
from service.training.worker import path_main, run_in_process

logger = logging.getLogger("service.training.queue")


def store_path(
    job_id: str,
    task: TrainTask,
    estimator: Any,
    settings: Settings,
    store: Any,
    job_store: JobStore,
    stop: threading.Event,
) -> None:
    """The ν path of the model job ``job_id`` stored, into its record (module docstring); never
    raises. A failure is logged and, once the model is known, recorded in the record's entries:
    a record left "pending" would tell its plots to retry, then that the server had stopped."""
    model_id = None
    try:
        ended = job_store.ended_with(job_id)
        if ended is None or ended[0] != "succeeded" or ended[1] is None:
            return
        model_id = ended[1]
        if task.X is None:
            store.registry.set_plot_data(model_id, {"path": {"error": NO_PATH_BY_REFERENCE}})
            return
        outcome = run_in_process(
            task,
            timeout_s=settings.train_timeout_s,
            cancelled=stop,
            target=path_main,
            extra_args=(estimator,),
        )
        later = outcome.result if outcome.status == "succeeded" else None
        if later is None:
            error = {"error": f"the path was not computed ({outcome.status}: {outcome.message})"}
            later = dict.fromkeys(later_keys(task.spec, estimator), error)
        store.registry.set_plot_data(model_id, later)
    except Exception as exc:
        logger.exception("job %s: the model's path could not be stored", job_id)
        if model_id is not None:
            error = {"error": f"the path could not be stored ({type(exc).__name__}: {exc})"}
            try:
                store.registry.set_plot_data(
                    model_id, dict.fromkeys(later_keys(task.spec, estimator), error)
                )
            except Exception:  # the registry itself is failing: the log has it
                logger.warning("job %s: its path's error could not be recorded", job_id)
