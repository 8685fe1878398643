"""Fitting one training task and measuring it: what a worker process runs (``worker``).

The estimator comes from the task's ``ModelSpec``, behind the preprocessing pipeline; a search or
cross-validation runs first when asked; the fit reports progress through the estimator's hook
(0.15..0.85 of the job); then the metrics, the plot data and, with a ``LocalArtifact``, the
fitted model's joblib bytes. Callable in-process too (tests, the Dask executor).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from service.model_types import ModelSpec
from service.plots.data import plot_data
from service.repository.local_files import LocalArtifact
from service.training.artifact_write import ArtifactWrite
from service.training.metrics import classification_metrics
from service.training.selection import run_model_selection
from service.training.tasks import TrainTask


@dataclass
class FitResult:
    """What a worker sends back: the fitted estimator and what the record says of the fit."""

    estimator: Any
    params: dict[str, Any]
    training: dict[str, Any]
    metrics: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)
    """Record entries beyond the metrics: ``search`` and ``plot_data`` (service.plots.data)."""
    artifact: bytes | None = None
    """The estimator's joblib bytes, when the worker was handed a ``LocalArtifact``."""
    artifact_written: bool = False
    """Those bytes are on disk (fsynced and named) at that ``LocalArtifact`` already; False from a
    worker process, whose ``written`` message follows its ``done`` (``artifact_write``)."""


def _scalar_or_list(value: Any) -> int | list[int] | None:
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim == 0:
        return int(arr)
    return [int(v) for v in arr.ravel()]


def _converged(estimator: Any) -> bool | None:
    value = getattr(estimator, "converged_", None)
    if value is None:
        return None
    return bool(np.all(value))


def _attach_progress(estimator: Any, report: Callable[[float], None]) -> Callable[[Any], None]:
    """Hand ``report`` to an estimator with ``set_progress_callback``; return how to detach it."""
    if not hasattr(estimator, "set_progress_callback"):
        return lambda est: None

    def hook(fraction: float) -> None:
        report(0.15 + 0.7 * min(max(float(fraction), 0.0), 1.0))

    estimator.set_progress_callback(hook)
    return lambda est: est.set_progress_callback(None)


def with_preprocessing(estimator: Any, preprocess: str) -> Any:
    """``estimator``, behind a StandardScaler in one pipeline when ``preprocess`` is standard.

    The scaler is part of the stored model, so predict takes raw rows.
    """
    if preprocess != "standard":
        return estimator
    return Pipeline([("scale", StandardScaler()), ("model", estimator)])


def resolved_params(spec: ModelSpec, estimator: Any) -> dict[str, Any]:
    """The estimator's values of the parameters this model type exposes (its params model + fixed)."""
    exposed = set(spec.params_model.model_fields) | set(spec.fixed)
    return {k: v for k, v in estimator.get_params().items() if k in exposed}


def fit_and_evaluate(
    task: TrainTask,
    report: Callable[[float], None],
    *,
    n_jobs: int = 1,
    artifact: LocalArtifact | None = None,
) -> FitResult:
    """Fit the task's estimator and measure it; the worker's whole job (also callable in-process).

    With ``artifact``, the fitted model's bytes are written there once it is measured
    (``artifact_write``), and come back in the result with whether they were written.
    """
    result, writing = fit_evaluate_writing(task, report, n_jobs=n_jobs, artifact=artifact)
    if writing is not None:
        result.artifact_written = writing.write()
    return result


def fit_evaluate_writing(
    task: TrainTask,
    report: Callable[[float], None],
    *,
    n_jobs: int = 1,
    artifact: LocalArtifact | None = None,
) -> tuple[FitResult, ArtifactWrite | None]:
    """``fit_and_evaluate`` without the artifact's write: the result (with the model's bytes),
    and the write still to do (None without ``artifact``).

    ``n_jobs`` other than 1 is handed to an estimator that has the parameter (its joblib pieces
    then go to the active joblib backend, e.g. a dask cluster); such a fit reports only the coarse
    stages, because its progress hook cannot travel to the processes that run the pieces.
    """
    if task.data is not None:  # rows by reference: read here, never sent with the task
        from service.training.reference_fit import fit_by_reference

        return fit_by_reference(task, report, n_jobs=n_jobs), None
    core = task.spec.make_estimator(task.params)
    model = with_preprocessing(core, task.meta.get("preprocess", "none"))
    report(0.15)
    extra = run_model_selection(task, model, report, n_jobs) if task.search or task.cv else {}
    if "search" in extra:
        core.set_params(**extra["search"]["best_params"])
    parallel = n_jobs != 1 and "n_jobs" in core.get_params()
    if parallel:
        core.set_params(n_jobs=n_jobs)
    quiet = parallel or bool(extra)  # after a search or CV the fit's own hook would go backwards
    detach = (lambda est: None) if quiet else _attach_progress(core, report)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(task.X, task.y)
    seconds = time.perf_counter() - start
    detach(core)
    metrics = {"train": classification_metrics(model, task.X, task.y), "heldout": None}
    if task.X_test is not None and task.y_test is not None:
        metrics["heldout"] = classification_metrics(model, task.X_test, task.y_test)
    if "cv" in extra:
        metrics["cv"] = extra["cv"]
    extras = {"plot_data": plot_data(task.spec, model, task.X, task.y, path=False)}
    if "search" in extra:
        extras["search"] = extra["search"]
    writing = None if artifact is None else ArtifactWrite(artifact, model)
    report(0.9)
    messages = sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})
    return FitResult(
        estimator=model,
        params=resolved_params(task.spec, core),
        training={
            "n_samples": int(task.X.shape[0]),
            "seconds": round(seconds, 6),
            "n_iter": _scalar_or_list(getattr(core, "n_iter_", None)),
            "converged": _converged(core),
            "warnings": messages,
        },
        metrics=metrics,
        extras=extras,
        artifact=None if writing is None else writing.data,
    ), writing
