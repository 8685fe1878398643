"""A stored model's scoring methods on rows the service has already checked.

The service checks every posted matrix itself (finite float64, 2-D, the model's width:
``service.data_checks``), so scikit-learn's per-call input validation in a ``Pipeline`` and its
``StandardScaler`` is repeated work that costs more than scoring one row. For a pipeline of
``StandardScaler`` steps in front of a bsvm estimator, the scaling is applied here with the same
arithmetic as ``StandardScaler.transform`` (``(x - mean_) / scale_``) and the final estimator's
method is called directly (the core skips its own re-validation for such arrays). Any other
estimator is called as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

Scorer = Callable[[np.ndarray], Any]


def standardize(X: np.ndarray, scaler: StandardScaler) -> np.ndarray:
    """``scaler.transform(X)`` for a dense float64 X: z = (x − mean_) / scale_ per column."""
    Z = X - scaler.mean_ if scaler.with_mean else X.copy()
    if scaler.with_std:
        Z /= scaler.scale_
    return Z


def scalers_of(estimator: Any) -> list[StandardScaler] | None:
    """The fitted dense ``StandardScaler`` steps in front of a pipeline's model, else ``None``."""
    if type(estimator) is not Pipeline:
        return None
    steps = [step for _, step in estimator.steps[:-1] if step != "passthrough" and step is not None]
    if not all(type(step) is StandardScaler for step in steps):
        return None
    return steps


def scorer(estimator: Any, method: str) -> Scorer:
    """``getattr(estimator, method)``, with a pipeline's scaling done here (see module docstring)."""
    scalers = scalers_of(estimator)
    if scalers is None:
        return getattr(estimator, method)
    final = getattr(estimator.steps[-1][1], method)

    def score(X: np.ndarray) -> Any:
        for scaler in scalers:
            X = standardize(X, scaler)
        return final(X)

    return score
