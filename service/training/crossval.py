"""Stratified k-fold cross-validation and a grid search over a model type's parameters.

Folds are ``StratifiedKFold(k, shuffle=True, random_state)``. Each fold (and, for the search,
each candidate × fold) is one ``joblib.Parallel`` job: with ``n_jobs=1`` they run in the worker one
after another; under the dask executor (``n_jobs=-1`` inside ``parallel_config(backend="dask")``)
they spread over the cluster. Fold metrics are those of ``evaluation.classification_metrics``; a
fold also keeps its ROC curve (binary: of ``classes[1]`` from decision values; multiclass: the
macro one-vs-rest curve, TPR averaged over classes on a common FPR grid, from probabilities or
else one-vs-rest decision values), at most ``MAX_ROC_POINTS`` points, so plots need no refit.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.metrics import auc as area
from sklearn.metrics import roc_curve
from sklearn.model_selection import StratifiedKFold

from service.training.metrics import classification_metrics

METRICS = ("accuracy", "precision", "recall", "f1", "roc_auc")
MAX_ROC_POINTS = 200
GRID_POINTS = 101
"""FPR grid of the multiclass macro curve and of the mean curve over folds."""
MAX_CANDIDATES = 200
MAX_VALUES = 20
DEFAULT_SEARCH_K = 5


def fold_indices(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index pairs of ``StratifiedKFold(k, shuffle=True, random_state=seed)``."""
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros((y.shape[0], 1)), y))


def downsample(fpr: np.ndarray, tpr: np.ndarray, limit: int = MAX_ROC_POINTS) -> dict[str, list]:
    """At most ``limit`` points of a ROC curve, both ends kept (evenly spaced indices)."""
    if fpr.size > limit:
        keep = np.unique(np.round(np.linspace(0, fpr.size - 1, limit)).astype(int))
        fpr, tpr = fpr[keep], tpr[keep]
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist()}


def _ovr_scores(estimator: Any, X: np.ndarray) -> np.ndarray | None:
    """Per-class scores (n, n_classes): probabilities, else one-vs-rest decision values."""
    if hasattr(estimator, "predict_proba"):
        return np.asarray(estimator.predict_proba(X))
    if hasattr(estimator, "decision_function"):
        scores = np.asarray(estimator.decision_function(X))
        if scores.ndim == 2 and scores.shape[1] == estimator.classes_.size:
            return scores
    return None


def roc_points(estimator: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """A fold's ROC curve ``{fpr, tpr, auc}`` (see the module notes), or None without scores."""
    classes = estimator.classes_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if classes.size == 2:
            if hasattr(estimator, "decision_function"):
                scores = np.asarray(estimator.decision_function(X)).ravel()
            elif hasattr(estimator, "predict_proba"):
                scores = np.asarray(estimator.predict_proba(X))[:, 1]
            else:
                return None
            positive = y == classes[1]
            if positive.all() or not positive.any():
                return None
            fpr, tpr, _ = roc_curve(positive, scores)
            return {**downsample(fpr, tpr), "auc": float(area(fpr, tpr))}
        scores = _ovr_scores(estimator, X)
        if scores is None:
            return None
        grid = np.linspace(0.0, 1.0, GRID_POINTS)
        curves, aucs = [], []
        for j, label in enumerate(classes):
            positive = y == label
            if positive.all() or not positive.any():
                continue
            fpr, tpr, _ = roc_curve(positive, scores[:, j])
            aucs.append(area(fpr, tpr))
            curves.append(np.interp(grid, fpr, tpr))
        if not curves:
            return None
        tpr = np.mean(curves, axis=0)
        tpr[0] = 0.0
        return {"fpr": grid.tolist(), "tpr": tpr.tolist(), "auc": float(np.mean(aucs))}


def fit_fold(
    estimator: Any, X: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, roc: bool
) -> dict[str, Any]:
    """Fit a clone on ``train`` and score it on ``test``: metrics (and the ROC curve)."""
    model = clone(estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[train], y[train])
    out: dict[str, Any] = classification_metrics(model, X[test], y[test])
    if roc:
        out["roc"] = roc_points(model, X[test], y[test])
    return out


def _mean_sd(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and population SD of the values (None when any is missing)."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std())


def _run(
    jobs: list[Any], n_jobs: int, progress: Callable[[float], None] | None
) -> list[dict[str, Any]]:
    """Run joblib ``jobs`` in order, reporting the fraction done after each.

    A backend that cannot stream results (joblib's ``multiprocessing``) runs them as one batch.
    """
    out = []
    try:
        results = Parallel(n_jobs=n_jobs, return_as="generator")(jobs)
    except ValueError:  # raised before any job runs: "does not support return_as"
        results = Parallel(n_jobs=n_jobs)(jobs)
    for i, result in enumerate(results, start=1):
        out.append(result)
        if progress is not None:
            progress(i / len(jobs))
    return out


def cross_validate(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    k: int,
    seed: int,
    *,
    n_jobs: int = 1,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Per-fold metrics, their mean and SD, and the folds' ROC curves (``metrics.cv``)."""
    splits = fold_indices(y, k, seed)
    jobs = [delayed(fit_fold)(estimator, X, y, tr, te, True) for tr, te in splits]
    folds = _run(jobs, n_jobs, progress)
    roc = [fold.pop("roc") for fold in folds]
    summary = {m: _mean_sd([fold[m] for fold in folds]) for m in METRICS}
    return {
        "k": k,
        "random_state": seed,
        "folds": folds,
        "mean": {m: v[0] for m, v in summary.items()},
        "sd": {m: v[1] for m, v in summary.items()},
        "roc": roc,
    }


def candidates(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the grid's key order (the last varies fastest)."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def grid_search(
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    grid: dict[str, list[Any]],
    scoring: str,
    k: int,
    seed: int,
    *,
    n_jobs: int = 1,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Mean and SD of ``scoring`` over the folds for each candidate; the best (first of ties)."""
    splits = fold_indices(y, k, seed)
    cands = candidates(grid)
    jobs = [
        delayed(fit_fold)(
            clone(estimator).set_params(**step_params(estimator, c)), X, y, tr, te, False
        )
        for c in cands
        for tr, te in splits
    ]
    scores = _run(jobs, n_jobs, progress)
    results = []
    for i, params in enumerate(cands):
        mean, sd = _mean_sd([s[scoring] for s in scores[i * k : (i + 1) * k]])
        results.append({"params": params, "mean": mean, "sd": sd})
    scored = [r for r in results if r["mean"] is not None]
    if not scored:
        raise ValueError(f"search_scoring {scoring!r} is undefined for this model on these data")
    best = max(scored, key=lambda r: r["mean"])  # max keeps the first of equal means
    return {
        "scoring": scoring,
        "k": k,
        "random_state": seed,
        "best_params": best["params"],
        "best_score": best["mean"],
        "results": results,
    }


def step_params(model: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` of the model's estimator, prefixed with its step name inside a pipeline."""
    steps = getattr(model, "steps", None)
    return {f"{steps[-1][0]}__{k}": v for k, v in params.items()} if steps else dict(params)
