"""Labels and decision values from a binary rbf KernelSVM's folded plan.

A predict of one row spends more on the estimator's calls than on its arithmetic: the pipeline's
scaling, ``KernelSVM.predict``'s checks and its dozen numpy calls. For a binary rbf ``KernelSVM``,
alone or behind ``StandardScaler`` steps, ``bsvm_core.rbf_rows`` folds the scaling into the
support vectors' terms once per loaded model (the ``Servable``), and rows are scored in a handful
of numpy calls. Labels are always the estimator's: rows whose decision value is within the
plan's tie band are scored again by the estimator. Decision values differ from the estimator's by
float rounding only. Blocks of more than ``PLAN_MAX_ENTRIES`` kernel entries go to the estimator,
which splits them into blocks of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from bsvm_core import KernelSVM
from bsvm_core.rbf_rows import RbfRows
from service.inference.scoring import Scorer, scalers_of

PLAN_MAX_ENTRIES = 2**20
"""Kernel entries (rows × support vectors) the plan scores at once at most: 8 MiB of float64."""


def scaling(scalers: list[Any]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(μ, σ) of ``StandardScaler`` steps applied in turn, as one (x − μ) / σ: μ = μ₁ + σ₁ μ₂,
    σ = σ₁ σ₂ for two (None for a part no step has)."""
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    for step in scalers:
        if step.with_mean:
            shifted = step.mean_ if scale is None else scale * step.mean_
            mean = shifted if mean is None else mean + shifted
        if step.with_std:
            scale = step.scale_ if scale is None else scale * step.scale_
    return mean, scale


def plan_of(estimator: Any) -> tuple[RbfRows, np.ndarray, int] | None:
    """(plan, classes, rows it scores at once at most) of a binary rbf ``KernelSVM``, alone or
    behind ``StandardScaler`` steps; else None."""
    if type(estimator) is Pipeline:
        scalers = scalers_of(estimator)
        if scalers is None:
            return None
        final = estimator.steps[-1][1]
    else:
        final, scalers = estimator, []
    if type(final) is not KernelSVM:
        return None
    plan = final.rbf_rows(*scaling(scalers))
    if plan is None:
        return None
    return plan, final.classes_, max(1, PLAN_MAX_ENTRIES // plan.coef.shape[0])


def planned_scorers(estimator: Any, scorers: dict[str, Scorer]) -> dict[str, Scorer]:
    """``scorers`` with ``label`` and ``decision`` from the model's plan (the estimator's own for
    larger blocks, and for labels near a tie); ``scorers`` as they are for any other model."""
    found = plan_of(estimator)
    if found is None:
        return scorers
    plan, classes, max_rows = found
    out = dict(scorers)
    label, decision = scorers.get("label"), scorers.get("decision")
    if label is not None:

        def planned_label(X: np.ndarray) -> Any:
            n = X.shape[0]
            if n == 1:  # one row: its decision as a float, its label as a slice of classes
                f = plan.decision(X[0])
                if not abs(f) > plan.tie:  # near a tie, or NaN
                    return label(X)
                return classes[1:] if f > 0 else classes[:1]
            if n > max_rows:
                return label(X)
            positive, unsure = plan.labels(X)
            labels = classes[positive.view(np.int8)]
            if unsure.any():
                redo = np.flatnonzero(unsure)
                labels[redo] = label(X[redo])
            return labels

        out["label"] = planned_label
    if decision is not None:

        def planned_decision(X: np.ndarray) -> Any:
            return plan.decisions(X) if X.shape[0] <= max_rows else decision(X)

        out["decision"] = planned_decision
    return out
