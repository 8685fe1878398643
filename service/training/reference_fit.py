"""The worker's side of a training by reference: the rows are read here, never sent in the task.

An estimator with ``fit_partitions`` is fitted on the source's partitions: streamed through this
process one at a time (``StreamedPartitions``), or read and kept on the Dask cluster's workers when
the fit runs there (``DaskPartitions``, through the fit process's client); every pass moves only
the model and its sums. ``standard`` preprocessing is a ``StandardScaler`` fitted by two passes of
sums, applied to each block where it lives, and stored in front of the model as in memory.
Metrics are counted per partition (a confusion matrix; ROC AUC needs every score, so it is null).
A held-out evaluation keeps whole partitions aside, chosen by the split's seed. The job's progress
counts passes, partitions and iterations (``reference_progress``), and the record's
``training.peak_rss_mb`` is the fit process's peak resident memory: it holds a partition or a
few, never the data set.

Any other estimator gets every row in this process (checked against ``BSVM_MAX_ROWS`` before the
job) and is fitted exactly as posted rows are.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from service.data.loading import PartLoader, iter_blocks
from service.data.partitions import ScaledPartitions, feature_stats, fit_scaler, open_partitions
from service.plots.data import by_reference_plot_data
from service.training.fitting import (
    FitResult,
    _converged,
    _scalar_or_list,
    fit_and_evaluate,
    resolved_params,
)
from service.training.metrics import heldout_split
from service.training.reference_progress import ReferenceProgress
from service.training.tasks import TrainTask


def part_loaders(data: dict[str, Any]) -> list[PartLoader]:
    """The loaders of a task's ``data`` entry (``reference_task``), in partition order."""
    features, target = tuple(data["features"]), data["target"]
    return [PartLoader(**p, features=features, target=target) for p in data["parts"]]


def split_partitions(
    parts: list[PartLoader], evaluation: dict[str, Any] | None
) -> tuple[list[PartLoader], list[PartLoader]]:
    """(training, held-out) partitions: ``test_fraction`` of them, at least one each, by seed."""
    if not evaluation:
        return parts, []
    n_test = min(max(1, round(evaluation["test_fraction"] * len(parts))), len(parts) - 1)
    order = np.random.default_rng(evaluation["random_state"]).permutation(len(parts))
    test = set(order[:n_test].tolist())
    return [p for i, p in enumerate(parts) if i not in test], [
        p for i, p in enumerate(parts) if i in test
    ]


def dask_client(n_jobs: int) -> Any:
    """The fit process's ``distributed`` client when it runs on a Dask cluster, else None."""
    if n_jobs == 1 or "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _confusion(X: np.ndarray, y: np.ndarray, p: int, model: Any, classes: np.ndarray) -> np.ndarray:
    """Counts[i, j] of rows of class ``classes[i]`` predicted ``classes[j]``."""
    true = np.searchsorted(classes, y)
    pred = np.searchsorted(classes, model.predict(X))
    counts = np.zeros((classes.size, classes.size), dtype=np.int64)
    np.add.at(counts, (np.clip(true, 0, classes.size - 1), pred), 1)
    return counts


def confusion_metrics(counts: np.ndarray) -> dict[str, Any]:
    """``classification_metrics`` from a confusion matrix (binary: of class 1; else macro);
    ROC AUC is null (it needs every score)."""
    total = int(counts.sum())
    tp = np.diag(counts).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.nan_to_num(tp / counts.sum(axis=0))
        recall = np.nan_to_num(tp / counts.sum(axis=1))
        f1 = np.nan_to_num(2 * precision * recall / (precision + recall))
    binary = counts.shape[0] == 2
    pick = (lambda v: float(v[1])) if binary else (lambda v: float(np.mean(v)))
    return {
        "n_samples": total,
        "accuracy": float(tp.sum() / total) if total else 0.0,
        "precision": pick(precision),
        "recall": pick(recall),
        "f1": pick(f1),
        "roc_auc": None,
        "average": "binary" if binary else "macro",
    }


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB (``VmHWM``; None where /proc has none)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _collected(task: TrainTask, parts: list[PartLoader]) -> TrainTask:
    """The task with every row read into X, y (and the stratified held-out split)."""
    blocks = list(iter_blocks(parts))
    X = np.ascontiguousarray(np.concatenate([b[0] for b in blocks]))
    y = np.concatenate([b[1] for b in blocks])
    del blocks
    loaded = replace(task, X=X, y=y, data=None)
    evaluation = task.data["evaluation"] if task.data else None
    if evaluation:
        split = heldout_split(X, y, evaluation["test_fraction"], evaluation["random_state"])
        loaded.X, loaded.X_test, loaded.y, loaded.y_test = split
    return loaded


def fit_by_reference(task: TrainTask, report: Any, *, n_jobs: int = 1) -> FitResult:
    """Fit and measure the task's estimator on its source (see the module notes)."""
    assert task.data is not None
    loaders = part_loaders(task.data)
    if not task.data["by_partitions"]:
        result = fit_and_evaluate(_collected(task, loaders), report, n_jobs=n_jobs)
        result.training["partitions"] = len(loaders)
        return result
    train, test = split_partitions(loaders, task.data["evaluation"])
    client = dask_client(n_jobs)
    progress = ReferenceProgress(report)
    parts = open_partitions(train, client, on_partition=progress.partition)
    core = task.spec.make_estimator(task.params)
    standard = task.meta.get("preprocess", "none") == "standard"
    try:
        if standard:
            progress.enter("scaling")
        scaler = fit_scaler(parts) if standard else None
        fitted = ScaledPartitions(parts, scaler.mean_, scaler.scale_) if scaler else parts
        progress.enter("fitting")
        hooked = hasattr(core, "set_progress_callback")
        if hooked:
            core.set_progress_callback(progress.fit)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            core.fit_partitions(fitted)
        seconds = time.perf_counter() - start
        if hooked:
            core.set_progress_callback(None)
        progress.enter("evaluating")
        model = Pipeline([("scale", scaler), ("model", core)]) if scaler else core
        classes = np.asarray(core.classes_)
        metrics: dict[str, Any] = {
            "train": confusion_metrics(parts.map_sum(_confusion, model, classes)),
            "heldout": None,
        }
        stats = feature_stats(parts)
        n_train = parts.n_rows
        passes = int(getattr(parts, "passes", 0)) or None
    finally:
        if hasattr(parts, "close"):
            parts.close()
    if test:
        held = open_partitions(test, client, on_partition=progress.partition)
        try:
            metrics["heldout"] = confusion_metrics(held.map_sum(_confusion, model, classes))
        finally:
            if hasattr(held, "close"):
                held.close()
    progress.finish()
    messages = sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})
    return FitResult(
        estimator=model,
        params=resolved_params(task.spec, core),
        training={
            "n_samples": int(n_train),
            "seconds": round(seconds, 6),
            "n_iter": _scalar_or_list(getattr(core, "n_iter_", None)),
            "converged": _converged(core),
            "warnings": messages,
            "partitions": len(train),
            "passes": passes,
            "peak_rss_mb": peak_rss_mb(),
        },
        metrics=metrics,
        extras={"plot_data": by_reference_plot_data(task.spec, core, stats)},
    )
