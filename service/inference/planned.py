"""Labels and decision values from a model's scoring plan (``bsvm_core.row_plans``).

A predict of a few rows spends more on the estimator's calls than on its arithmetic: the
pipeline's scaling, the estimator's checks and its dozen numpy calls. For a ``LinearSVM``,
``KernelSVM`` (any built-in kernel), ``BayesianSVM`` (its point decision) or ``LDA``, alone or
behind ``StandardScaler`` steps, the estimator's ``row_plan`` folds the scaling into the model's
terms once per loaded model (the ``Servable``), and rows are scored in a handful of numpy calls.
Labels are always the estimator's: rows whose label the plan's error bound cannot settle (a
decision near a tie, near-equal top classes, a one-vs-one pairwise value near 0) are scored again
by the estimator. Decision values differ from the estimator's by float rounding only (one-vs-one
rows with a pairwise value near 0, whose votes could differ, are the estimator's too).
Probabilities, intervals, QDA and other estimators keep the estimator's scorers. Blocks of more
than ``PLAN_MAX_ENTRIES`` working entries go to the estimator, which splits them itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from bsvm_core import LDA, BayesianSVM, KernelSVM, LinearSVM
from bsvm_core.row_plans import RowPlan
from service.inference.scoring import Scorer, scalers_of

PLAN_MAX_ENTRIES = 2**20
"""Working entries (rows × support vectors, or × features) the plan scores at once at most."""

PLANNED = (LinearSVM, KernelSVM, BayesianSVM, LDA)
"""Estimators (exactly these types: a subclass may score otherwise) that make a ``row_plan``."""


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


def plan_of(estimator: Any) -> tuple[RowPlan, np.ndarray, int] | None:
    """(plan, classes, rows it scores at once at most) of a ``PLANNED`` estimator, alone or
    behind ``StandardScaler`` steps; else None."""
    if type(estimator) is Pipeline:
        scalers = scalers_of(estimator)
        if scalers is None:
            return None
        final = estimator.steps[-1][1]
    else:
        final, scalers = estimator, []
    if type(final) not in PLANNED:
        return None
    plan = final.row_plan(*scaling(scalers))
    if plan is None:
        return None
    return plan, final.classes_, max(1, PLAN_MAX_ENTRIES // max(1, plan.rows.width))


def planned_scorers(estimator: Any, scorers: dict[str, Scorer]) -> dict[str, Scorer]:
    """``scorers`` with ``label`` and ``decision`` from the model's plan (the estimator's own for
    larger blocks, and for rows the plan cannot settle); ``scorers`` as they are for any other
    model."""
    found = plan_of(estimator)
    if found is None:
        return scorers
    plan, classes, max_rows = found
    row_label, row_decision = plan.row_label, plan.row_decision
    out = dict(scorers)
    label, decision = scorers.get("label"), scorers.get("decision")
    if label is not None:

        def planned_label(X: np.ndarray) -> Any:
            n = X.shape[0]
            if n == 1:  # one row: its label as a slice of classes
                k = row_label(X[0])
                return label(X) if k is None else classes[k : k + 1]
            if n > max_rows:
                return label(X)
            index, certain = plan.labels(X)
            labels = classes[index]
            if not certain.all():
                redo = np.flatnonzero(~certain)
                labels[redo] = label(X[redo])
            return labels

        out["label"] = planned_label
    if decision is not None:

        def planned_decision(X: np.ndarray) -> Any:
            n = X.shape[0]
            if n == 1:
                values = row_decision(X[0])
                return decision(X) if values is None else values
            if n > max_rows:
                return decision(X)
            values, sure = plan.decisions(X)
            if sure is not None and not sure.all():
                redo = np.flatnonzero(~sure)
                values[redo] = decision(X[redo])
            return values

        out["decision"] = planned_decision
    return out
