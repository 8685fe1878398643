"""Input validation shared by every estimator: clear ValueErrors that name the problem."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from .exceptions import BsvmValueError


def _reject_ragged(X: Any, name: str) -> None:
    """Raise a named error for ragged nested lists before numpy's generic message."""
    if isinstance(X, list | tuple) and X and isinstance(X[0], list | tuple):
        widths = {len(row) if isinstance(row, list | tuple) else -1 for row in X}
        if len(widths) > 1:
            raise BsvmValueError(
                f"{name} is ragged: its rows have different lengths {sorted(widths)}."
            )


def check_fit_data(estimator: Any, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate (X, y) for fit; set ``n_features_in_``; return float64 X and raw-label y."""
    _reject_ragged(X, "X")
    if y is None:
        raise BsvmValueError(
            f"{type(estimator).__name__} requires y to be passed, but the target y is None."
        )
    X, y = validate_data(
        estimator, X, y, dtype=np.float64, ensure_all_finite=True, ensure_min_samples=1
    )
    check_classification_targets(y)
    return X, y


def check_predict_data(estimator: Any, X: Any) -> np.ndarray:
    """Validate X at predict time: finite, 2-D, and the feature count seen in fit."""
    _reject_ragged(X, "X")
    return validate_data(estimator, X, dtype=np.float64, ensure_all_finite=True, reset=False)


def encode_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (classes_, y_index) with classes sorted; at least two classes are required."""
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise BsvmValueError(
            f"y contains 1 class ({classes[0]!r}); a classifier needs at least 2 classes."
        )
    return classes, y_idx
